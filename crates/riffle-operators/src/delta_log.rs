//! Key-level incremental snapshots for state kept as dense group ids.
//!
//! A [`DeltaLog`] remembers the batches earlier snapshots produced for one unit of state
//! (a window) and which groups changed since. A snapshot then adds one batch with only
//! the changed and new groups; restoring the batches in order, later rows overwriting
//! earlier ones, rebuilds the state. The earlier batches are handed to the checkpoint
//! again unchanged, so their files are reused instead of rewritten. When the chain grows
//! long or holds mostly overwritten rows, the next snapshot writes the unit in full.

use crate::aggregate::DistinctValues;
use riffle_core::{OperatorState, RecordBatch};

/// Longest chain of batches before a full rewrite (bounds files per window and restore work).
pub(crate) const MAX_CHAIN: usize = 32;

/// Chains of at most this many group rows are not rewritten for being mostly
/// overwritten: they cost little to restore, and a group's row may stand for much more
/// than itself (a count DISTINCT list holds what the group gained, its whole set only in
/// a full rewrite), so a few busy groups would otherwise rewrite their sets every other
/// snapshot.
const SMALL_CHAIN_ROWS: usize = 4096;

/// Batches written for one unit of state and the groups changed since the last one.
#[derive(Debug, Default)]
pub(crate) struct DeltaLog {
    /// The batches to restore in order; empty until the first snapshot.
    pub(crate) batches: Vec<RecordBatch>,
    /// Groups over all `batches`, overwritten ones included (a batch may hold several
    /// rows per group, as a Top-N's ranks).
    chain_groups: usize,
    /// Groups in the batch the caller is making from the last `take_changed`.
    taken: usize,
    /// Whether that batch starts a new chain (holds every group whole).
    whole: bool,
    /// Groups `0..written` are in `batches`; newer ids are new since the last snapshot.
    written: usize,
    /// Per written group: changed since the last snapshot.
    dirty: Vec<bool>,
    /// The changed written groups, each once.
    changed: Vec<u32>,
    /// Groups held outside the ids (the spill tier's): in the chain, and live.
    outside: usize,
    /// Whether the last [`take_changed`](DeltaLog::take_changed) started a new chain.
    restarted: bool,
}

impl DeltaLog {
    /// Notes that `groups` were updated.
    pub(crate) fn touch(&mut self, groups: &[u32]) {
        for &g in groups {
            if let Some(flag) = self.dirty.get_mut(g as usize) {
                if !*flag {
                    *flag = true;
                    self.changed.push(g);
                }
            }
        }
    }

    /// The groups the next snapshot batch must hold, given `len` groups now; empty when
    /// nothing changed. Starts a fresh chain (every group) when the old one is too long
    /// or mostly overwritten; the caller then [`push`](Self::push)es the batch.
    pub(crate) fn take_changed(&mut self, len: usize) -> Vec<u32> {
        let delta_rows = self.changed.len() + len.saturating_sub(self.written);
        let full = self.batches.is_empty()
            || self.batches.len() >= MAX_CHAIN
            || (self.chain_groups + delta_rows > 2 * (len + self.outside)
                && self.chain_groups + delta_rows > SMALL_CHAIN_ROWS);
        for &g in &self.changed {
            self.dirty[g as usize] = false;
        }
        let mut changed = std::mem::take(&mut self.changed);
        self.dirty.resize(len, false);
        self.whole = full;
        self.restarted = false;
        if delta_rows == 0 && !self.batches.is_empty() {
            self.taken = 0;
            return Vec::new();
        }
        if full {
            self.restarted = true;
            self.batches.clear();
            self.chain_groups = 0;
            self.taken = len;
            return (0..len as u32).collect();
        }
        changed.sort_unstable();
        changed.extend(self.written as u32..len as u32);
        self.taken = changed.len();
        changed
    }

    /// Which count DISTINCT values the batch for the groups
    /// [`take_changed`](Self::take_changed) returned holds: a delta only what each set
    /// gained, a batch that starts a new chain whole sets.
    pub(crate) fn distinct_values(&self) -> DistinctValues {
        if self.whole {
            DistinctValues::All
        } else {
            DistinctValues::Added
        }
    }

    /// Notes that `groups` live outside the ids (spilled): a chain is judged mostly
    /// overwritten against every live group.
    pub(crate) fn set_outside(&mut self, groups: usize) {
        self.outside = groups;
    }

    /// Whether the last [`take_changed`](Self::take_changed) started a new chain: the
    /// snapshot must then hold every group, those outside the ids too
    /// ([`push_outside`](Self::push_outside)).
    pub(crate) fn restarted(&self) -> bool {
        self.restarted
    }

    /// Adds a batch of groups held outside the ids to a chain just started.
    pub(crate) fn push_outside(&mut self, batch: RecordBatch) {
        self.chain_groups += batch.num_rows();
        self.batches.push(batch);
    }

    /// Whether group `g` may leave the ids (be spilled) without the next snapshot
    /// missing it: it is in the chain and unchanged since, or the next snapshot starts
    /// a new chain anyway (none was taken since the start).
    pub(crate) fn may_leave(&self, g: u32) -> bool {
        self.batches.is_empty()
            || ((g as usize) < self.written && !self.dirty.get(g as usize).copied().unwrap_or(true))
    }

    /// Renumbers the groups after all but `kept` (ascending old ids, each of which
    /// [`may_leave`](Self::may_leave) or not) left: the kept ones become `0..kept.len()`.
    pub(crate) fn retain(&mut self, kept: &[u32]) {
        let mut new_id = vec![u32::MAX; self.dirty.len().max(self.written)];
        let mut written = 0;
        let mut dirty = Vec::with_capacity(kept.len());
        for (new, &old) in kept.iter().enumerate() {
            if (old as usize) < self.written {
                written += 1;
                new_id[old as usize] = new as u32;
                dirty.push(self.dirty.get(old as usize).copied().unwrap_or(false));
            }
        }
        self.changed = (self.changed.iter())
            .map(|&g| new_id[g as usize])
            .filter(|&g| g != u32::MAX)
            .collect();
        self.written = written;
        self.dirty = dirty;
    }

    /// Records the batch written for the groups [`take_changed`](Self::take_changed)
    /// returned, when the unit had `len` groups.
    pub(crate) fn push(&mut self, batch: RecordBatch, len: usize) {
        self.chain_groups += self.taken;
        self.batches.push(batch);
        self.written = len;
    }

    /// The operator state after a snapshot: the earlier batches and `batch`, the one
    /// made for the groups [`take_changed`](Self::take_changed) returned (none when
    /// nothing changed), when the unit had `len` groups.
    pub(crate) fn state_after(&mut self, batch: Option<RecordBatch>, len: usize) -> OperatorState {
        if let Some(batch) = batch {
            self.push(batch, len);
        }
        OperatorState {
            batches: self.batches.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::{ArrayRef, UInt32Array};
    use riffle_core::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn batch(ids: &[u32]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("g", DataType::UInt32, false)]));
        let column: ArrayRef = Arc::new(UInt32Array::from(ids.to_vec()));
        RecordBatch::try_new(schema, vec![column]).unwrap()
    }

    fn snapshot(log: &mut DeltaLog, len: usize) -> Vec<u32> {
        let ids = log.take_changed(len);
        if !ids.is_empty() {
            log.push(batch(&ids), len);
        }
        ids
    }

    #[test]
    fn first_snapshot_is_full_then_only_changed_and_new_groups() {
        let mut log = DeltaLog::default();
        log.touch(&[0, 1, 2]); // nothing written yet: new groups need no flag
        assert_eq!(snapshot(&mut log, 3), vec![0, 1, 2]);
        assert!(snapshot(&mut log, 3).is_empty(), "nothing changed");
        log.touch(&[2, 0, 2]);
        assert_eq!(snapshot(&mut log, 5), vec![0, 2, 3, 4]);
        log.touch(&[1]);
        assert_eq!(snapshot(&mut log, 5), vec![1]);
        assert_eq!(log.batches.len(), 3);
    }

    #[test]
    fn mostly_overwritten_chain_is_rewritten_in_full() {
        let n = SMALL_CHAIN_ROWS as u32;
        let all: Vec<u32> = (0..n).collect();
        let mut log = DeltaLog::default();
        snapshot(&mut log, n as usize);
        log.touch(&all);
        // n rows chained + n changed = 2n, not above 2n: still a delta.
        assert_eq!(snapshot(&mut log, n as usize), all);
        assert_eq!(log.distinct_values(), DistinctValues::Added);
        log.touch(&[0]);
        // 2n + 1 > 2n: the whole unit again, as the only batch.
        assert_eq!(snapshot(&mut log, n as usize), all);
        assert_eq!(log.distinct_values(), DistinctValues::All);
        assert_eq!(log.batches.len(), 1);
    }

    #[test]
    fn a_small_chain_is_not_rewritten_for_being_overwritten() {
        let mut log = DeltaLog::default();
        snapshot(&mut log, 4);
        for _ in 0..10 {
            log.touch(&[0, 1, 2, 3]);
            assert_eq!(snapshot(&mut log, 4), vec![0, 1, 2, 3]);
            assert_eq!(log.distinct_values(), DistinctValues::Added, "a delta");
        }
        assert_eq!(log.batches.len(), 11);
    }

    #[test]
    fn chain_length_is_bounded() {
        let mut log = DeltaLog::default();
        for len in 1..=100 {
            log.touch(&[0]);
            snapshot(&mut log, len * 10);
            assert!(log.batches.len() <= MAX_CHAIN);
        }
    }
}
