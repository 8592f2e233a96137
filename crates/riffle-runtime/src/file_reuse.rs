//! Incremental checkpoints by file reuse: which state files of the last committed epoch
//! a new snapshot of a stable-state operator can reference instead of rewriting.

use crate::graph::JobGraph;
use riffle_core::{Epoch, OperatorState, RecordBatch};
use riffle_state::manifest::FileEntry;
use riffle_state::state_file::file_groups;
use std::collections::{BTreeMap, HashMap, HashSet};

/// State files that hold exactly some snapshot batches, per (operator, subtask).
/// Holding the batches keeps their memory alive, so an array pointer seen again in a
/// later snapshot is the same, unchanged array, never a new one at a freed address.
pub(crate) type ReuseCache = HashMap<(String, usize), Vec<(FileEntry, Vec<RecordBatch>)>>;

/// A batch's identity: where its first column's values live, and its extent.
fn batch_identity(batch: &RecordBatch) -> Option<(usize, usize, usize)> {
    let data = batch.columns().first()?.to_data();
    let buffer = data.buffers().first()?;
    Some((buffer.as_ptr() as usize, data.offset(), batch.num_rows()))
}

/// Splits a stable-state snapshot into files of the previous epoch whose batches are all
/// still present (reused as they are) and the batches that need writing.
pub(crate) fn reuse_files(
    previous: &[(FileEntry, Vec<RecordBatch>)],
    state: riffle_core::OperatorState,
) -> (
    Vec<(FileEntry, Vec<RecordBatch>)>,
    riffle_core::OperatorState,
) {
    let ids: HashMap<(usize, usize, usize), usize> = state
        .batches
        .iter()
        .enumerate()
        .filter_map(|(i, b)| Some((batch_identity(b)?, i)))
        .collect();
    let mut covered = vec![false; state.batches.len()];
    let mut reused = Vec::new();
    for (entry, batches) in previous {
        let positions: Option<Vec<usize>> = batches
            .iter()
            .map(|b| {
                let i = *ids.get(&batch_identity(b)?)?;
                (!covered[i]).then_some(i)
            })
            .collect();
        if let Some(positions) = positions.filter(|p| !p.is_empty()) {
            for i in positions {
                covered[i] = true;
            }
            reused.push((entry.clone(), batches.clone()));
        }
    }
    let fresh = state
        .batches
        .into_iter()
        .zip(covered)
        .filter_map(|(b, c)| (!c).then_some(b))
        .collect();
    (reused, riffle_core::OperatorState { batches: fresh })
}

/// The files a stable-state snapshot consists of, each with the batches it holds: those
/// it `reused`, then those `written` for its `fresh` batches (grouped into files as
/// `write_state` grouped them). The next epoch's snapshot may reuse any of them.
pub(crate) fn snapshot_files<'a>(
    reused: Vec<(FileEntry, Vec<RecordBatch>)>,
    written: &'a [FileEntry],
    fresh: &OperatorState,
) -> impl Iterator<Item = (FileEntry, Vec<RecordBatch>)> + 'a {
    let groups: Vec<Vec<RecordBatch>> = file_groups(&fresh.batches)
        .into_iter()
        .map(|(_, batches)| batches.into_iter().cloned().collect())
        .collect();
    reused
        .into_iter()
        .chain(written.iter().cloned().zip(groups))
}

/// Whether a snapshot for `epoch` may reuse files of the epoch before it, given the
/// newest epoch its writer heard committed. Only then is that epoch surely the newest
/// committed one: nothing newer can commit before `epoch` does, so its manifest still
/// references the files and garbage collection keeps them until `epoch`'s manifest
/// references them too.
pub fn may_reuse_previous(epoch: Epoch, heard_committed: Option<Epoch>) -> bool {
    epoch.0 > 0 && heard_committed == Some(Epoch(epoch.0 - 1))
}

/// Incremental checkpoints on a worker that writes its own subtasks' state and hears
/// late, over the network, which epoch committed (docs/cluster.md, "One checkpoint
/// across workers"). It keeps the files of the last two epochs it wrote, with their
/// batches, and reuses those of the epoch before only as [`may_reuse_previous`] allows.
pub struct WorkerFileReuse {
    /// Operators whose snapshots keep unchanged batches (the others are written whole).
    stable: HashSet<String>,
    /// Per epoch, the files each (operator, subtask) wrote or reused.
    by_epoch: BTreeMap<u64, ReuseCache>,
}

impl WorkerFileReuse {
    /// For `graph`'s stable-state operators.
    pub fn new(graph: &JobGraph) -> Self {
        Self {
            stable: graph
                .nodes()
                .iter()
                .filter(|n| n.has_stable_state())
                .map(|n| n.id.0.clone())
                .collect(),
            by_epoch: BTreeMap::new(),
        }
    }

    /// Splits `operator`'s snapshot of `subtask` at `epoch` into files it can reference
    /// (with their batches) and the batches that need writing.
    pub fn split(
        &self,
        (operator, subtask, epoch): (&str, usize, Epoch),
        heard_committed: Option<Epoch>,
        state: OperatorState,
    ) -> (Vec<(FileEntry, Vec<RecordBatch>)>, OperatorState) {
        let previous = (self.stable.contains(operator)
            && may_reuse_previous(epoch, heard_committed))
        .then(|| self.by_epoch.get(&(epoch.0 - 1)))
        .flatten()
        .and_then(|files| files.get(&(operator.to_string(), subtask)));
        match previous {
            Some(previous) => reuse_files(previous, state),
            None => (Vec::new(), state),
        }
    }

    /// Records what `operator`'s snapshot of `subtask` at `epoch` consists of: the files
    /// it reused and those just written for `fresh`; forgets epochs before the previous.
    pub fn record(
        &mut self,
        (operator, subtask, epoch): (&str, usize, Epoch),
        reused: Vec<(FileEntry, Vec<RecordBatch>)>,
        written: &[FileEntry],
        fresh: &OperatorState,
    ) {
        if !self.stable.contains(operator) {
            return;
        }
        self.by_epoch.retain(|e, _| e + 1 >= epoch.0);
        self.by_epoch
            .entry(epoch.0)
            .or_default()
            .entry((operator.to_string(), subtask))
            .or_default()
            .extend(snapshot_files(reused, written, fresh));
    }
}

#[cfg(test)]
mod worker_tests {
    use super::*;

    #[test]
    fn a_worker_reuses_files_of_the_epoch_before_once_it_heard_it_committed() {
        assert!(may_reuse_previous(Epoch(8), Some(Epoch(7))));
    }

    #[test]
    fn a_worker_writes_whole_when_it_heard_of_no_commit_or_of_an_older_one() {
        // Epoch 7 may have committed unheard, and let garbage collection take epoch 6's
        // files: epoch 8 must not reference them.
        assert!(!may_reuse_previous(Epoch(8), Some(Epoch(6))));
        assert!(!may_reuse_previous(Epoch(8), None));
        assert!(!may_reuse_previous(Epoch(0), None));
    }
}
