//! The value sets of count DISTINCT, one per group slot, and the values each set gained
//! since the last snapshot: a snapshot that adds only the changed groups to earlier ones
//! (`crate::delta_log`) then writes only those values, not whole sets that grow without
//! end (Nexmark q16's distinct bidders per channel and day). Values never leave a set,
//! so a restore takes the union of a group's rows.

use std::hash::Hash;

/// foldhash: inserting into these sets is most of a distinct aggregate's time with std's
/// SipHash. Seeded per process.
type HashSet<T> = foldhash::HashSet<T>;

/// Which values of a set a snapshot writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DistinctValues {
    /// The whole set (a first snapshot, or a chain written afresh).
    All,
    /// The values added since the last snapshot.
    Added,
}

/// Distinct values per group slot.
#[derive(Debug)]
pub(crate) struct DistinctSets<T> {
    sets: Vec<HashSet<T>>,
    /// Per slot, what its set gained since the last snapshot; kept only once a snapshot
    /// was taken (a job without checkpoints keeps no second copy).
    added: Vec<Vec<T>>,
    logging: bool,
}

impl<T: Hash + Eq + Clone + Ord> DistinctSets<T> {
    pub(crate) fn new() -> Self {
        Self {
            sets: Vec::new(),
            added: Vec::new(),
            logging: false,
        }
    }

    pub(crate) fn resize(&mut self, slots: usize) {
        self.sets.resize_with(slots, HashSet::default);
        if self.logging {
            self.added.resize_with(slots, Vec::new);
        }
    }

    pub(crate) fn clear(&mut self, slot: usize) {
        self.sets[slot].clear();
        if let Some(added) = self.added.get_mut(slot) {
            added.clear();
        }
    }

    pub(crate) fn len(&self, slot: usize) -> usize {
        self.sets[slot].len()
    }

    pub(crate) fn insert(&mut self, slot: usize, value: T) {
        if self.logging {
            if self.sets[slot].insert(value.clone()) {
                self.added[slot].push(value);
            }
        } else {
            self.sets[slot].insert(value);
        }
    }

    /// Adds `values` to slot `slot` (merges and restores).
    pub(crate) fn extend(&mut self, slot: usize, values: impl IntoIterator<Item = T>) {
        for v in values {
            self.insert(slot, v);
        }
    }

    /// Empties slot `slot`, giving its values.
    pub(crate) fn take(&mut self, slot: usize) -> HashSet<T> {
        if let Some(added) = self.added.get_mut(slot) {
            added.clear();
        }
        std::mem::take(&mut self.sets[slot])
    }

    /// About the bytes the sets hold: their tables, and `heap` per value besides (a
    /// string's text).
    pub(crate) fn memory_size(&self, heap: usize) -> usize {
        let per_value = std::mem::size_of::<T>() + 1 + heap;
        let tables: usize = (self.sets.iter()).map(|s| s.capacity() * per_value).sum();
        let added: usize = self.added.iter().map(|a| a.capacity() * per_value).sum();
        tables + added + (self.sets.capacity() + self.added.capacity()) * 48
    }

    pub(crate) fn values(&self, slot: usize) -> impl Iterator<Item = &T> {
        self.sets[slot].iter()
    }

    /// Slot `slot`'s values for a snapshot: a whole set sorted (hash order differs from
    /// one process to the next), the values added in the order they came (already the
    /// same on every run over the same input; sorting them was a tenth of q16's time).
    pub(crate) fn snapshot_values(&self, slot: usize, which: DistinctValues) -> Vec<&T> {
        match which {
            DistinctValues::All => {
                let mut values: Vec<&T> = self.sets[slot].iter().collect();
                values.sort_unstable();
                values
            }
            DistinctValues::Added => self
                .added
                .get(slot)
                .map(|a| a.iter().collect())
                .unwrap_or_default(),
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

    #[test]
    fn gains_are_kept_only_after_a_snapshot_and_only_until_the_next() {
        let mut sets = DistinctSets::<i64>::new();
        sets.resize(2);
        sets.extend(0, [3, 1, 3]);
        assert!(sets.snapshot_values(0, DistinctValues::Added).is_empty());
        assert_eq!(sets.snapshot_values(0, DistinctValues::All), [&1, &3]);
        sets.snapshot_taken();
        sets.extend(0, [1, 7, 5]);
        sets.insert(1, 2);
        assert_eq!(sets.snapshot_values(0, DistinctValues::Added), [&7, &5]);
        assert_eq!(sets.snapshot_values(1, DistinctValues::Added), [&2]);
        sets.snapshot_taken();
        assert!(sets.snapshot_values(0, DistinctValues::Added).is_empty());
        assert_eq!(sets.len(0), 4);
    }
}
