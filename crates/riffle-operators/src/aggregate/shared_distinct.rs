//! The value sets of several count DISTINCT aggregates over the same column, kept as
//! one map per group slot from each value to the aggregates ("members") that hold it.
//! Nexmark q16 counts distinct bidders overall and under three `FILTER (WHERE …)`
//! clauses: four sets took four hash inserts per row; one map takes one lookup.
//!
//! Like [`DistinctSets`](super::distinct_sets::DistinctSets), values never leave a
//! member, and each slot logs what its members gained since the last snapshot, so a
//! snapshot writes only that and a restore takes the union of a group's rows.

use super::distinct_sets::DistinctValues;
use std::borrow::Borrow;
use std::hash::Hash;

type HashMap<K, V> = foldhash::HashMap<K, V>;

/// Bit `m` of a mask stands for member `m`.
pub(crate) type Members = u64;

/// The most members one map holds (bits of [`Members`]).
pub(crate) const MAX_MEMBERS: usize = Members::BITS as usize;

/// Per group slot, each value and the members holding it.
#[derive(Debug)]
pub(crate) struct SharedDistinct<T> {
    members: usize,
    sets: Vec<HashMap<T, Members>>,
    /// Values per slot and member: `counts[slot * members + member]`.
    counts: Vec<i64>,
    /// Per slot, each value with the members it joined since the last snapshot; kept
    /// only once a snapshot was taken.
    added: Vec<Vec<(T, Members)>>,
    logging: bool,
}

impl<T: Hash + Eq + Clone + Ord> SharedDistinct<T> {
    /// About the bytes the maps hold, `heap` per value besides (a string's text).
    pub(crate) fn memory_size(&self, heap: usize) -> usize {
        let per_value = std::mem::size_of::<(T, Members)>() + 1 + heap;
        let maps: usize = self.sets.iter().map(|s| s.capacity() * per_value).sum();
        let added: usize = self.added.iter().map(|a| a.capacity() * per_value).sum();
        maps + added
            + self.counts.capacity() * 8
            + (self.sets.capacity() + self.added.capacity()) * 48
    }

    /// A map for `members` aggregates (at most [`MAX_MEMBERS`]).
    pub(crate) fn new(members: usize) -> Self {
        debug_assert!((1..=MAX_MEMBERS).contains(&members));
        Self {
            members,
            sets: Vec::new(),
            counts: Vec::new(),
            added: Vec::new(),
            logging: false,
        }
    }

    pub(crate) fn resize(&mut self, slots: usize) {
        self.sets.resize_with(slots, HashMap::default);
        self.counts.resize(slots * self.members, 0);
        if self.logging {
            self.added.resize_with(slots, Vec::new);
        }
    }

    pub(crate) fn clear(&mut self, slot: usize) {
        self.sets[slot].clear();
        self.slot_counts(slot).fill(0);
        if let Some(added) = self.added.get_mut(slot) {
            added.clear();
        }
    }

    /// How many distinct values member `member` holds in slot `slot`.
    pub(crate) fn count(&self, slot: usize, member: usize) -> i64 {
        self.counts[slot * self.members + member]
    }

    fn slot_counts(&mut self, slot: usize) -> &mut [i64] {
        &mut self.counts[slot * self.members..(slot + 1) * self.members]
    }

    /// Adds `value` to the members in `mask` of slot `slot`; `owned` makes the value
    /// kept when it is new to the slot or gains a member while logging.
    pub(crate) fn insert<Q>(
        &mut self,
        slot: usize,
        value: &Q,
        mask: Members,
        owned: impl Fn(&Q) -> T,
    ) where
        T: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let gained = match self.sets[slot].get_mut(value) {
            Some(held) => {
                let gained = mask & !*held;
                *held |= gained;
                gained
            }
            None => {
                self.sets[slot].insert(owned(value), mask);
                mask
            }
        };
        if gained == 0 {
            return;
        }
        let counts = self.slot_counts(slot);
        let mut bits = gained;
        while bits != 0 {
            counts[bits.trailing_zeros() as usize] += 1;
            bits &= bits - 1;
        }
        if self.logging {
            self.added[slot].push((owned(value), gained));
        }
    }

    /// Empties slot `slot`, giving its values and their members.
    pub(crate) fn take(&mut self, slot: usize) -> HashMap<T, Members> {
        self.slot_counts(slot).fill(0);
        if let Some(added) = self.added.get_mut(slot) {
            added.clear();
        }
        std::mem::take(&mut self.sets[slot])
    }

    /// Slot `slot`'s values and the members holding each.
    pub(crate) fn values(&self, slot: usize) -> impl Iterator<Item = (&T, Members)> {
        self.sets[slot].iter().map(|(v, m)| (v, *m))
    }

    /// Slot `slot`'s values for a snapshot, each with its members: all of them sorted
    /// by value, or those that joined members since the last snapshot (with the
    /// members they joined) in the order they came, as
    /// [`DistinctSets::snapshot_values`](super::distinct_sets::DistinctSets::snapshot_values)
    /// orders them. A member's list is the entries holding its bit; sorting once for
    /// all members was a sixth of q16's profile when each member sorted its own.
    pub(crate) fn snapshot_entries(
        &self,
        slot: usize,
        which: DistinctValues,
    ) -> Vec<(&T, Members)> {
        match which {
            DistinctValues::All => {
                let mut entries: Vec<(&T, Members)> = self.values(slot).collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                entries
            }
            DistinctValues::Added => self.added.get(slot).map_or_else(Vec::new, |added| {
                added.iter().map(|(v, m)| (v, *m)).collect()
            }),
        }
    }

    /// A snapshot was taken: from now on every slot's gains are since this one.
    pub(crate) fn snapshot_taken(&mut self) {
        self.logging = true;
        self.added.resize_with(self.sets.len(), Vec::new);
        self.added.iter_mut().for_each(Vec::clear);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member_values(
        sets: &SharedDistinct<i64>,
        slot: usize,
        member: usize,
        which: DistinctValues,
    ) -> Vec<i64> {
        let entries = sets.snapshot_entries(slot, which);
        entries
            .into_iter()
            .filter(|(_, m)| m & 1 << member != 0)
            .map(|(v, _)| *v)
            .collect()
    }

    fn insert(sets: &mut SharedDistinct<i64>, slot: usize, values: &[i64], mask: Members) {
        for v in values {
            sets.insert(slot, v, mask, |v| *v);
        }
    }

    #[test]
    fn each_member_counts_the_values_given_to_it() {
        let mut sets = SharedDistinct::<i64>::new(3);
        sets.resize(2);
        insert(&mut sets, 0, &[1, 2, 2], 0b011);
        insert(&mut sets, 0, &[2, 3], 0b100);
        insert(&mut sets, 1, &[9], 0b001);
        assert_eq!(
            (0..3).map(|m| sets.count(0, m)).collect::<Vec<_>>(),
            [2, 2, 2]
        );
        assert_eq!(
            (0..3).map(|m| sets.count(1, m)).collect::<Vec<_>>(),
            [1, 0, 0]
        );
        assert_eq!(member_values(&sets, 0, 2, DistinctValues::All), [2, 3]);
        sets.clear(0);
        assert_eq!(sets.count(0, 0), 0);
        assert_eq!(sets.values(0).count(), 0);
    }

    #[test]
    fn a_snapshot_after_the_first_writes_what_each_member_gained() {
        let mut sets = SharedDistinct::<i64>::new(2);
        sets.resize(1);
        insert(&mut sets, 0, &[5], 0b01);
        assert!(member_values(&sets, 0, 0, DistinctValues::Added).is_empty());
        sets.snapshot_taken();
        // 5 joins member 1 only; 6 is new to both.
        insert(&mut sets, 0, &[5, 6], 0b11);
        assert_eq!(member_values(&sets, 0, 0, DistinctValues::Added), [6]);
        assert_eq!(member_values(&sets, 0, 1, DistinctValues::Added), [5, 6]);
        sets.snapshot_taken();
        insert(&mut sets, 0, &[5, 6], 0b11);
        assert!(member_values(&sets, 0, 1, DistinctValues::Added).is_empty());
    }

    #[test]
    fn strings_are_looked_up_borrowed_and_kept_owned() {
        let mut sets = SharedDistinct::<Box<str>>::new(2);
        sets.resize(1);
        for (s, mask) in [("a", 0b01), ("a", 0b10), ("b", 0b10)] {
            sets.insert(0, s, mask, |s: &str| Box::from(s));
        }
        assert_eq!((sets.count(0, 0), sets.count(0, 1)), (1, 2));
        let taken = sets.take(0);
        assert_eq!(taken.get("a"), Some(&0b11));
        assert_eq!(sets.count(0, 1), 0);
    }
}
