//! Key-level incremental snapshots for state kept as dense group ids.
//!
//! A [`DeltaLog`] remembers the batches earlier snapshots produced for one unit of state
//! (a window) and which groups changed since. A snapshot then adds one batch with only
//! the changed and new groups; restoring the batches in order, later rows overwriting
//! earlier ones, rebuilds the state. The earlier batches are handed to the checkpoint
//! again unchanged, so their files are reused instead of rewritten. When the chain grows
//! long or holds mostly overwritten rows, the next snapshot writes the unit in full.
//!
//! Groups held outside the ids (a spill tier's) need not be rewritten in one snapshot
//! when a chain restarts: the old chain stays until the caller has written them into
//! the new one over the next snapshots ([`DeltaLog::rolled`]), so a restart never needs
//! them in memory at once.
//!
//! Once the snapshot that wrote them has committed, the chain need not hold its
//! batches' rows: [`DeltaLog::hand_over_committed`] keeps of each only what names its
//! file to the checkpoint writer (docs/engine.md, "State beyond memory").

use crate::aggregate::DistinctValues;
use riffle_core::{
    hand_over, is_handed, may_reference_previous, Epoch, OperatorState, RecordBatch,
};

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
    /// Of those, the ones the next snapshot adds from outside as changed (at most).
    outside_changed: usize,
    /// Whether the last [`take_changed`](DeltaLog::take_changed) started a new chain.
    restarted: bool,
    /// Whether the next snapshot must start a new chain: the chain holds handed-over
    /// batches its writer may not reference.
    must_restart: bool,
    /// Leading batches of the previous chain, kept while a rolling restart writes the
    /// groups held outside the ids into the new one (until [`rolled`](Self::rolled));
    /// 0 when not rolling.
    old: usize,
    /// Rows of those batches (counted in `chain_groups` too).
    old_groups: usize,
    /// Snapshots that added a batch since the chain started.
    snapshots: usize,
}

impl DeltaLog {
    /// Goes on from `chain`, the batches a restore applied in order (handed over: the
    /// restored checkpoint's files hold them), written by `snapshots` snapshots, which
    /// now hold the unit's `len` groups as they are: the next snapshot is a delta.
    pub(crate) fn continue_chain(&mut self, chain: Vec<RecordBatch>, len: usize, snapshots: usize) {
        *self = Self {
            chain_groups: chain.iter().map(RecordBatch::num_rows).sum(),
            batches: chain,
            written: len,
            dirty: vec![false; len],
            snapshots,
            ..Self::default()
        };
    }

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

    /// Before the snapshot for `epoch`: once the snapshot before it is heard
    /// `committed`, stops holding the rows of every batch of the chain (all of which that
    /// snapshot wrote or referenced), keeping only what names their files to the writer
    /// ([`hand_over`]). Where the writer may not reference them (that snapshot is not
    /// heard committed, [`may_reference_previous`]), a chain holding handed-over batches
    /// starts anew at this snapshot.
    pub(crate) fn hand_over_committed(&mut self, epoch: Epoch, committed: Option<Epoch>) {
        if may_reference_previous(epoch, committed) {
            for batch in &mut self.batches {
                if !is_handed(batch) {
                    *batch = hand_over(batch);
                }
            }
        } else if self.batches.iter().any(is_handed) {
            self.must_restart = true;
        }
    }

    /// The groups the next snapshot batch must hold, given `len` groups now; empty when
    /// nothing changed. Starts a fresh chain (every group) when the old one is too long
    /// or mostly overwritten; the caller then [`push`](Self::push)es the batch.
    pub(crate) fn take_changed(&mut self, len: usize) -> Vec<u32> {
        let delta_rows =
            self.changed.len() + len.saturating_sub(self.written) + self.outside_changed;
        // While rolling, the old chain is still needed: no restart but a forced one.
        let full = self.batches.is_empty()
            || self.must_restart
            || (self.old == 0
                && (self.snapshots >= MAX_CHAIN
                    || (self.chain_groups + delta_rows > 2 * (len + self.outside)
                        && self.chain_groups + delta_rows > SMALL_CHAIN_ROWS)));
        for &g in &self.changed {
            self.dirty[g as usize] = false;
        }
        let mut changed = std::mem::take(&mut self.changed);
        self.dirty.resize(len, false);
        self.whole = full;
        self.restarted = false;
        if delta_rows == 0 && !self.batches.is_empty() && !self.must_restart {
            self.taken = 0;
            return Vec::new();
        }
        if full {
            self.restarted = true;
            // Groups outside the ids are written over the next snapshots, the old chain
            // kept meanwhile, when every old batch is in files of its own (handed over:
            // the committed snapshot before this one holds them), which the writer can
            // go on referencing apart from the new chain's; otherwise all go now.
            let handed = !self.batches.is_empty() && self.batches.iter().all(is_handed);
            if self.outside > 0 && handed && !self.must_restart {
                self.old = self.batches.len();
                self.old_groups = self.chain_groups;
            } else {
                self.batches.clear();
                self.chain_groups = 0;
                self.old = 0;
                self.old_groups = 0;
            }
            self.must_restart = false;
            self.snapshots = 1;
            self.taken = len;
            return (0..len as u32).collect();
        }
        // A delta, perhaps of groups outside the ids alone (memory's batch empty).
        self.snapshots += 1;
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

    /// Notes that `groups` live outside the ids (spilled), of which the next snapshot
    /// adds at most `changed` as changed ones ([`push_outside`](Self::push_outside)): a
    /// chain is judged mostly overwritten against every live group, and a snapshot
    /// that adds only those counts towards [`MAX_CHAIN`] all the same.
    pub(crate) fn set_outside(&mut self, groups: usize, changed: usize) {
        self.outside = groups;
        self.outside_changed = changed;
    }

    /// Whether the last [`take_changed`](Self::take_changed) started a new chain: the
    /// snapshot must then hold every group, those outside the ids too
    /// ([`push_outside`](Self::push_outside)): all of them now, or over the next
    /// snapshots while [`rolling`](Self::rolling).
    pub(crate) fn restarted(&self) -> bool {
        self.restarted
    }

    /// Whether a rolling restart keeps the old chain until every group held outside the
    /// ids is in the new one: the caller pushes them in pieces, then calls
    /// [`rolled`](Self::rolled).
    pub(crate) fn rolling(&self) -> bool {
        self.old > 0
    }

    /// Every group held outside the ids is in the new chain: the old one goes.
    pub(crate) fn rolled(&mut self) {
        self.batches.drain(..self.old);
        self.chain_groups -= self.old_groups;
        self.old = 0;
        self.old_groups = 0;
    }

    /// Adds a batch of groups held outside the ids to the new chain (a piece of them,
    /// while [`rolling`](Self::rolling)).
    pub(crate) fn push_outside(&mut self, batch: RecordBatch) {
        self.chain_groups += batch.num_rows();
        self.batches.push(batch);
    }

    /// Adds a streamed part's placeholder, standing for `groups` groups held outside the
    /// ids, to the new chain ([`riffle_core::StreamedBatches`]).
    pub(crate) fn push_streamed(&mut self, placeholder: RecordBatch, groups: usize) {
        self.chain_groups += groups;
        self.batches.push(placeholder);
    }

    /// Whether the chain holds group `g` as it is now: it is in the chain and unchanged
    /// since, or the next snapshot starts a new chain anyway (none was taken since the
    /// start). A group that leaves the ids otherwise must reach the next snapshot by
    /// other means (the spill tier notes it as changed).
    pub(crate) fn held_by_chain(&self, g: u32) -> bool {
        self.batches.is_empty()
            || ((g as usize) < self.written && !self.dirty.get(g as usize).copied().unwrap_or(true))
    }

    /// Renumbers the groups after all but `kept` (ascending old ids) left: the kept
    /// ones become `0..kept.len()`.
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
        OperatorState::of(self.batches.clone())
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
    fn snapshots_of_changed_groups_outside_alone_count_towards_the_chain_limit() {
        let mut log = DeltaLog::default();
        assert_eq!(snapshot(&mut log, 1), vec![0]);
        for _ in 1..MAX_CHAIN {
            // Nothing changed in memory; two spilled groups changed.
            log.set_outside(3, 2);
            assert!(snapshot(&mut log, 1).is_empty());
            assert!(!log.restarted());
            log.push_outside(batch(&[7, 8]));
        }
        assert_eq!(log.batches.len(), MAX_CHAIN);
        log.set_outside(3, 2);
        assert_eq!(snapshot(&mut log, 1), vec![0], "a new chain");
        assert!(log.restarted());
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
    fn a_committed_chain_is_handed_over_and_restarts_when_it_may_not_be_referenced() {
        let mut log = DeltaLog::default();
        log.touch(&[0, 1]);
        log.hand_over_committed(Epoch(1), None);
        assert_eq!(snapshot(&mut log, 2), vec![0, 1]);
        // Epoch 1 committed: snapshot 2 names its batch instead of holding it.
        log.hand_over_committed(Epoch(2), Some(Epoch(1)));
        assert!(log.batches.iter().all(is_handed));
        log.touch(&[1]);
        assert_eq!(snapshot(&mut log, 2), vec![1], "still a delta");
        assert!(
            !is_handed(&log.batches[1]),
            "snapshot 2's own batch is held"
        );
        // Epoch 2 failed: snapshot 3 may not reference files, so the chain starts anew,
        // every group whole, though nothing changed.
        log.hand_over_committed(Epoch(3), Some(Epoch(1)));
        assert_eq!(snapshot(&mut log, 2), vec![0, 1]);
        assert_eq!(log.distinct_values(), DistinctValues::All);
        assert!(log.batches.iter().all(|b| !is_handed(b)));
        // A chain holding every batch whole goes on as a delta, whatever was heard.
        log.hand_over_committed(Epoch(4), None);
        assert!(snapshot(&mut log, 2).is_empty());
    }

    #[test]
    fn a_restart_with_groups_outside_keeps_the_old_chain_until_they_are_rolled_in() {
        let mut log = DeltaLog::default();
        snapshot(&mut log, 3);
        log.set_outside(5, 0);
        for e in 1..MAX_CHAIN as u64 {
            log.hand_over_committed(Epoch(e), Some(Epoch(e - 1)));
            log.touch(&[0]);
            snapshot(&mut log, 3);
        }
        log.hand_over_committed(Epoch(99), Some(Epoch(98)));
        log.touch(&[0]);
        // The 32nd batch: a new chain, the old one kept while the 5 outside groups are
        // written into it in pieces.
        assert_eq!(snapshot(&mut log, 3), vec![0, 1, 2]);
        assert!(log.restarted() && log.rolling());
        assert_eq!(log.distinct_values(), DistinctValues::All);
        assert_eq!(log.batches.len(), MAX_CHAIN + 1);
        log.push_outside(batch(&[7, 8]));
        // No restart while rolling, however long the chain.
        for _ in 0..MAX_CHAIN {
            log.touch(&[1]);
            assert_eq!(snapshot(&mut log, 3), vec![1]);
            assert!(log.rolling());
        }
        log.push_outside(batch(&[9, 10, 11]));
        log.rolled();
        assert!(!log.rolling());
        assert_eq!(
            log.batches.len(),
            1 + 1 + MAX_CHAIN + 1,
            "the old chain went"
        );
        assert_eq!(
            log.batches[0].num_rows(),
            3,
            "the new chain's whole batch leads"
        );
    }

    #[test]
    fn a_restart_whose_old_chain_is_held_whole_does_not_roll() {
        // Not heard committed: the old batches may share files with the new chain's.
        let mut log = DeltaLog::default();
        snapshot(&mut log, 3);
        log.set_outside(5, 0);
        for _ in 0..MAX_CHAIN {
            log.touch(&[0]);
            snapshot(&mut log, 3);
        }
        assert!(log.restarted() && !log.rolling());
        assert_eq!(log.batches.len(), 1);
    }

    #[test]
    fn a_forced_restart_while_rolling_drops_the_old_chain() {
        let mut log = DeltaLog::default();
        log.hand_over_committed(Epoch(1), None);
        snapshot(&mut log, 2);
        log.set_outside(4, 0);
        for e in 2..=MAX_CHAIN as u64 + 1 {
            log.hand_over_committed(Epoch(e), Some(Epoch(e - 1)));
            log.touch(&[0]);
            snapshot(&mut log, 2);
        }
        assert!(log.rolling());
        // An epoch failed: the handed-over old chain may not be referenced.
        log.hand_over_committed(Epoch(MAX_CHAIN as u64 + 3), None);
        assert_eq!(snapshot(&mut log, 2), vec![0, 1]);
        assert!(log.restarted() && !log.rolling(), "all outside groups now");
        assert!(log.batches.iter().all(|b| !is_handed(b)));
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
