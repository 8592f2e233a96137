//! Incremental checkpoints by file reuse: which state files of a committed epoch a new
//! snapshot of a stable-state operator can reference instead of rewriting; and the one
//! writer of acks' state, which uses it.

use crate::graph::JobGraph;
use crate::protocol::SnapshotAck;
use crate::restored_chains::RestoredChains;
use riffle_core::state::order_scope;
use riffle_core::{
    batch_identity, hand_over, is_handed, may_reference_previous, Epoch, OperatorState, RecordBatch,
};
use riffle_state::manifest::FileEntry;
use riffle_state::{CheckpointStore, StateError, WrittenFiles};
use std::collections::{BTreeMap, HashMap, HashSet};

/// State files that hold exactly some snapshot batches, per (operator, subtask): one
/// file of held batches, or the files of a streamed part, which its placeholder names
/// ([`riffle_core::StreamedBatches`]). Of each batch only its first column is kept
/// ([`hand_over`]): holding it keeps that array's memory alive, so its pointer seen
/// again in a later snapshot is the same, unchanged array, never a new one at a freed
/// address, while the rest is freed.
type ReuseCache = HashMap<(String, usize), Vec<FileSet>>;

/// Files that together hold exactly these batches.
type FileSet = (Vec<FileEntry>, Vec<RecordBatch>);

/// Splits a stable-state snapshot into files of the previous epoch whose batches are all
/// still present (reused as they are) and the batches that need writing.
///
/// The manifest lists reused files before written ones, and a restore applies a scope's
/// batches in that order ([`order_scope`]: a later row replaces an earlier one). So a
/// file is reused only if its batches come before every batch of their scope that is
/// written: a chain that lost batches from a file (a rolling restart dropping the old
/// chain) has the file's remaining batches, and every one after them, written again,
/// never listed out of order.
fn reuse_files(previous: &[FileSet], state: OperatorState) -> (Vec<FileSet>, OperatorState) {
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
            for &i in &positions {
                covered[i] = true;
            }
            reused.push((entry.clone(), batches.clone(), positions));
        }
    }
    // Each batch's scope once: it hashes the schema.
    let scopes: Vec<u64> = state.batches.iter().map(order_scope).collect();
    // Until no file is dropped: dropping one may write a batch before others.
    loop {
        let mut first_written: HashMap<u64, usize> = HashMap::new();
        for (i, &scope) in scopes.iter().enumerate() {
            if !covered[i] {
                first_written.entry(scope).or_insert(i);
            }
        }
        let in_order = |positions: &[usize]| {
            positions
                .iter()
                .all(|&i| first_written.get(&scopes[i]).is_none_or(|&first| i < first))
        };
        let before = reused.len();
        let (kept, dropped): (Vec<_>, Vec<_>) =
            reused.into_iter().partition(|(_, _, p)| in_order(p));
        for (_, _, positions) in dropped {
            for i in positions {
                covered[i] = false;
            }
        }
        reused = kept;
        if reused.len() == before {
            break;
        }
    }
    let reused: Vec<FileSet> = reused
        .into_iter()
        .map(|(entry, batches, _)| (entry, batches))
        .collect();
    let OperatorState { batches, streamed } = state;
    let fresh: Vec<RecordBatch> = batches
        .into_iter()
        .zip(covered)
        .filter_map(|(b, c)| (!c).then_some(b))
        .collect();
    // A streamed part whose placeholder a file set holds is not read again.
    let streamed = streamed
        .into_iter()
        .filter(|s| fresh.iter().any(|b| s.stands_for(b)))
        .collect();
    (
        reused,
        OperatorState {
            batches: fresh,
            streamed,
        },
    )
}

/// The files a stable-state snapshot consists of, each with the batches it holds: those
/// it `reused`, then those `written` for its `fresh` batches. The next epoch's snapshot
/// may reuse any of them.
fn snapshot_files<'a>(
    reused: Vec<FileSet>,
    written: &'a [WrittenFiles],
    fresh: &'a OperatorState,
) -> impl Iterator<Item = FileSet> + 'a {
    reused.into_iter().chain(written.iter().map(|w| {
        let batches = (w.batches.iter())
            .filter_map(|&i| fresh.batches.get(i).map(hand_over))
            .collect();
        (w.files.clone(), batches)
    }))
}

/// Whether a snapshot for `epoch` may reuse files of the epoch before it, given the
/// newest epoch its writer heard committed: [`may_reference_previous`], the rule an
/// operator that hands over its batches follows too.
pub fn may_reuse_previous(epoch: Epoch, heard_committed: Option<Epoch>) -> bool {
    may_reference_previous(epoch, heard_committed)
}

/// Incremental checkpoints where acks' state is written — by the coordinator of one
/// process, or by each worker for its own subtasks (docs/cluster.md, "One checkpoint
/// across workers"). It keeps, per epoch, the files each stable-state (operator,
/// subtask) wrote or reused, with their batches; the writer says which epoch's files
/// a snapshot may reference (the epoch before, once heard committed, as
/// [`may_reuse_previous`] allows: in one process and on every worker) and when older
/// epochs may be forgotten.
pub struct FileReuse {
    /// Operators whose snapshots keep unchanged batches (the others are written whole).
    stable: HashSet<String>,
    /// Per epoch, the files each (operator, subtask) wrote or reused.
    by_epoch: BTreeMap<u64, ReuseCache>,
    /// The restored checkpoint's files that subtasks continued their chains from.
    restored: Option<RestoredChains>,
    /// The newest epoch an ack was written for.
    newest: Option<Epoch>,
}

impl FileReuse {
    /// For `graph`'s stable-state operators.
    pub fn new(graph: &JobGraph) -> Self {
        Self::for_operators(
            graph
                .nodes()
                .iter()
                .filter(|n| n.has_stable_state())
                .map(|n| n.id.0.clone()),
        )
    }

    /// For the stable-state operators named `stable`.
    pub fn for_operators(stable: impl IntoIterator<Item = String>) -> Self {
        Self {
            stable: stable.into_iter().collect(),
            by_epoch: BTreeMap::new(),
            restored: None,
            newest: None,
        }
    }

    /// Also references the restored checkpoint's files from which subtasks continue
    /// their chains ([`crate::restored_chains`]): it counts that epoch as committed.
    pub fn continuing(mut self, restored: Option<RestoredChains>) -> Self {
        self.restored = restored;
        self
    }

    /// The newest epoch heard committed, or the restored one if newer: a restored
    /// checkpoint is committed, and a snapshot right after it may reference it.
    pub fn committed_or_restored(&self, heard: Option<Epoch>) -> Option<Epoch> {
        heard.max(self.restored.as_ref().map(RestoredChains::epoch))
    }

    /// Whether an ack of `epoch` comes after one of a newer epoch was written: its
    /// epoch ended (epochs start one at a time, the next once the one before completed
    /// or failed), and the files its snapshot may reference can be forgotten.
    pub fn is_late(&self, epoch: Epoch) -> bool {
        self.newest.is_some_and(|newest| epoch < newest)
    }

    /// Before a snapshot that may reference epoch `reusable`: takes the chains
    /// subtasks continued from the restored epoch if that is the one, as if it had
    /// recorded them. Once a snapshot may not reference it, none ever will: what was
    /// noted is released (its subtasks start new chains).
    fn take_restored(&mut self, reusable: Option<Epoch>) {
        let Some(restored) = &self.restored else {
            return;
        };
        let continued = restored.take();
        if reusable == Some(restored.epoch()) {
            let files = self.by_epoch.entry(restored.epoch().0).or_default();
            for (subtask, chain) in continued {
                let sets = chain
                    .into_iter()
                    .map(|(file, batches)| (vec![file], batches));
                files.entry(subtask).or_default().extend(sets);
            }
        } else {
            self.restored = None;
        }
    }

    /// Splits `operator`'s snapshot of `subtask` at `epoch` into files of epoch
    /// `reusable` it can reference (with their batches) and the batches that need
    /// writing.
    pub fn split(
        &self,
        (operator, subtask, _epoch): (&str, usize, Epoch),
        reusable: Option<Epoch>,
        state: OperatorState,
    ) -> (Vec<FileSet>, OperatorState) {
        let previous = reusable
            .filter(|_| self.stable.contains(operator))
            .and_then(|e| self.by_epoch.get(&e.0))
            .and_then(|files| files.get(&(operator.to_string(), subtask)));
        match previous {
            Some(previous) => reuse_files(previous, state),
            None => (Vec::new(), state),
        }
    }

    /// Records what `operator`'s snapshot of `subtask` at `epoch` consists of: the files
    /// it reused and those just written for `fresh`.
    pub fn record(
        &mut self,
        (operator, subtask, epoch): (&str, usize, Epoch),
        reused: Vec<FileSet>,
        written: &[WrittenFiles],
        fresh: &OperatorState,
    ) {
        if !self.stable.contains(operator) {
            return;
        }
        self.by_epoch
            .entry(epoch.0)
            .or_default()
            .entry((operator.to_string(), subtask))
            .or_default()
            .extend(snapshot_files(reused, written, fresh));
    }

    /// Forgets the files of epochs before `epoch` (no later snapshot may reference
    /// them), releasing their batches.
    pub fn forget_before(&mut self, epoch: Epoch) {
        self.by_epoch.retain(|e, _| *e >= epoch.0);
    }

    /// Forgets the files of every epoch but those in `keep` (releasing their batches):
    /// a failed epoch's, which no snapshot will reference.
    pub fn keep_only(&mut self, keep: &[Epoch]) {
        self.by_epoch.retain(|e, _| keep.iter().any(|k| k.0 == *e));
    }
}

/// Refuses batches among those to be written that their operator handed over
/// ([`hand_over`]): no file of the epoch the snapshot may reference holds them, and
/// written they would be empty. (A streamed part's placeholder is handed over too, and
/// written from its source.)
fn refuse_not_held(
    operator: &str,
    subtask: usize,
    fresh: &OperatorState,
) -> Result<(), StateError> {
    let not_held = |b: &&RecordBatch| is_handed(b) && fresh.streamed_for(b).is_none();
    match fresh.batches.iter().filter(not_held).count() {
        0 => Ok(()),
        batches => Err(StateError::NotHeld {
            operator: operator.to_string(),
            subtask,
            batches,
        }),
    }
}

/// Writes the state `ack` carries to `store` as files of `generation`, referencing
/// files of epoch `reusable` where a stable-state snapshot's batches did not change:
/// `ack.states` becomes `ack.written`. The one place acks' state is written, in one
/// process and on every worker. The bytes written (reused files are not).
///
/// # Errors
/// Writing a state file failed.
pub async fn write_ack_state(
    (store, generation): (&CheckpointStore, u64),
    reuse: &mut FileReuse,
    reusable: Option<Epoch>,
    ack: &mut SnapshotAck,
) -> Result<u64, StateError> {
    let mut bytes = 0;
    reuse.newest = reuse.newest.max(Some(ack.epoch));
    reuse.take_restored(reusable);
    for (operator, state) in std::mem::take(&mut ack.states) {
        let at = (operator.0.as_str(), ack.subtask, ack.epoch);
        let (reused, fresh) = reuse.split(at, reusable, state);
        refuse_not_held(&operator.0, ack.subtask, &fresh)?;
        let written = store
            .write_state(ack.epoch, generation, &operator.0, ack.subtask, &fresh)
            .await?;
        let written_files = written.iter().flat_map(|w| &w.files);
        bytes += written_files.clone().map(|f| f.bytes).sum::<u64>();
        let mut entries: Vec<FileEntry> = reused.iter().flat_map(|(f, _)| f.clone()).collect();
        entries.extend(written_files.cloned());
        reuse.record(at, reused, &written, &fresh);
        ack.written.push((operator, entries));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
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

    fn snapshot() -> OperatorState {
        let values = std::sync::Arc::new(riffle_core::arrow::array::Int64Array::from(vec![1, 2]));
        OperatorState::of(vec![
            RecordBatch::try_from_iter([("v", values as _)]).unwrap()
        ])
    }

    fn file(epoch: u64) -> FileEntry {
        FileEntry {
            path: format!("e{epoch}.parquet"),
            rows: 2,
            bytes: 10,
            crc32c: 0,
        }
    }

    /// One file of epoch `epoch` holding a snapshot's first `batches` batches.
    fn written(epoch: u64, batches: usize) -> Vec<WrittenFiles> {
        vec![WrittenFiles {
            files: vec![file(epoch)],
            batches: (0..batches).collect(),
        }]
    }

    #[test]
    fn a_handed_over_batch_is_found_in_the_file_that_holds_it_and_refused_elsewhere() {
        let mut reuse = FileReuse::for_operators(["agg".to_string()]);
        let state = snapshot();
        reuse.record(("agg", 0, Epoch(5)), Vec::new(), &written(5, 1), &state);
        let handed = OperatorState::of(state.batches.iter().map(hand_over).collect());
        assert!(handed.batches.iter().all(is_handed));
        let (reused, fresh) = reuse.split(("agg", 0, Epoch(6)), Some(Epoch(5)), handed.clone());
        assert_eq!(reused.len(), 1, "named by its first column, the same array");
        assert!(refuse_not_held("agg", 0, &fresh).is_ok());
        // Without the epoch that holds it, it is refused rather than written empty.
        let (reused, fresh) = reuse.split(("agg", 0, Epoch(6)), None, handed);
        assert!(reused.is_empty());
        assert!(matches!(
            refuse_not_held("agg", 0, &fresh),
            Err(StateError::NotHeld { batches: 1, .. })
        ));
        assert!(
            refuse_not_held("agg", 0, &state).is_ok(),
            "whole batches are written"
        );
    }

    #[test]
    fn a_streamed_part_once_written_is_referenced_by_all_its_files() {
        let mut reuse = FileReuse::for_operators(["agg".to_string()]);
        let schema = snapshot().batches[0].schema();
        let part = riffle_core::StreamedBatches::new(schema, Box::new(std::iter::empty()));
        let placeholder = part.placeholder().clone();
        let state = OperatorState {
            batches: vec![placeholder.clone()],
            streamed: vec![part],
        };
        assert!(is_handed(&placeholder), "it holds no rows");
        assert!(
            refuse_not_held("agg", 0, &state).is_ok(),
            "written from its source"
        );
        let written = vec![WrittenFiles {
            files: vec![file(5), file(6)],
            batches: vec![0],
        }];
        reuse.record(("agg", 0, Epoch(5)), Vec::new(), &written, &state);
        // The operator's next snapshot names the part by its placeholder alone.
        let next = OperatorState::of(vec![placeholder]);
        let (reused, fresh) = reuse.split(("agg", 0, Epoch(6)), Some(Epoch(5)), next.clone());
        assert_eq!(reused.len(), 1);
        assert_eq!(reused[0].0, vec![file(5), file(6)], "all of its files");
        assert!(fresh.batches.is_empty() && fresh.streamed.is_empty());
        // Where that epoch may not be referenced, it is refused, not written empty.
        let (_, fresh) = reuse.split(("agg", 0, Epoch(6)), None, next);
        assert!(matches!(
            refuse_not_held("agg", 0, &fresh),
            Err(StateError::NotHeld { batches: 1, .. })
        ));
    }

    #[test]
    fn files_continued_from_the_restored_epoch_are_referenced_only_by_the_epoch_after_it() {
        let state = snapshot();
        let handed: Vec<RecordBatch> = state.batches.iter().map(hand_over).collect();
        let continued = || {
            let chains = RestoredChains::new(Epoch(5));
            chains.continued("agg", 0, vec![(file(5), handed.clone())]);
            let reuse =
                FileReuse::for_operators(["agg".to_string()]).continuing(Some(chains.clone()));
            (chains, reuse)
        };
        let handed_state = OperatorState::of(handed.clone());
        let (_, mut reuse) = continued();
        assert_eq!(reuse.committed_or_restored(None), Some(Epoch(5)));
        assert_eq!(reuse.committed_or_restored(Some(Epoch(7))), Some(Epoch(7)));
        reuse.take_restored(Some(Epoch(5)));
        let (reused, fresh) =
            reuse.split(("agg", 0, Epoch(6)), Some(Epoch(5)), handed_state.clone());
        assert_eq!(
            reused.len(),
            1,
            "the restored file, as epoch 5 had recorded it"
        );
        assert!(fresh.batches.is_empty());
        // Epoch 6 failed: epoch 7 may not reference epoch 5, and what the subtasks noted
        // is let go.
        let (chains, mut reuse) = continued();
        reuse.take_restored(None);
        assert_eq!(reuse.committed_or_restored(None), None);
        let (reused, _) = reuse.split(("agg", 0, Epoch(7)), Some(Epoch(5)), handed_state);
        assert!(reused.is_empty());
        assert!(chains.take().is_empty(), "released");
    }

    fn batch(values: &[i64]) -> RecordBatch {
        let values =
            std::sync::Arc::new(riffle_core::arrow::array::Int64Array::from(values.to_vec()));
        RecordBatch::try_from_iter([("v", values as _)]).unwrap()
    }

    #[test]
    fn a_file_that_lost_batches_is_written_again_with_every_batch_after_it_in_order() {
        // Epoch 5: file A holds an old batch and the new chain's first batch; file B
        // a later delta.
        let (old, first, delta) = (batch(&[1]), batch(&[2]), batch(&[3]));
        let mut reuse = FileReuse::for_operators(["agg".to_string()]);
        let a = OperatorState::of(vec![old, first.clone()]);
        reuse.record(("agg", 0, Epoch(5)), Vec::new(), &written(4, 2), &a);
        let b = OperatorState::of(vec![delta.clone()]);
        reuse.record(("agg", 0, Epoch(5)), Vec::new(), &written(5, 1), &b);
        // The old batch left: A cannot be listed, so `first` is written, and B, which
        // a restore must apply after it, is written again after it rather than listed
        // before it.
        let state = OperatorState::of(vec![first, delta.clone()]);
        let (reused, fresh) = reuse.split(("agg", 0, Epoch(6)), Some(Epoch(5)), state);
        assert!(reused.is_empty(), "{reused:?}");
        assert_eq!(fresh.batches.len(), 2);
        // B alone, at the front, is still listed.
        let state = OperatorState::of(vec![delta, batch(&[4])]);
        let (reused, fresh) = reuse.split(("agg", 0, Epoch(6)), Some(Epoch(5)), state);
        assert_eq!(reused.len(), 1);
        assert_eq!(fresh.batches.len(), 1);
    }

    #[test]
    fn a_snapshot_references_only_the_epoch_its_writer_names_and_only_until_forgotten() {
        let mut reuse = FileReuse::for_operators(["agg".to_string()]);
        let state = snapshot();
        reuse.record(("agg", 0, Epoch(5)), Vec::new(), &written(5, 1), &state);
        let (reused, fresh) = reuse.split(("agg", 0, Epoch(7)), Some(Epoch(5)), state.clone());
        assert_eq!(reused.len(), 1, "the unchanged batch is epoch 5's file");
        assert!(fresh.batches.is_empty());
        let (reused, _) = reuse.split(("agg", 0, Epoch(7)), Some(Epoch(6)), state.clone());
        assert!(reused.is_empty(), "epoch 6 recorded nothing");
        let (reused, _) = reuse.split(("other", 0, Epoch(7)), Some(Epoch(5)), state.clone());
        assert!(reused.is_empty(), "not a stable-state operator");
        reuse.record(("agg", 0, Epoch(6)), Vec::new(), &written(6, 1), &state);
        reuse.keep_only(&[Epoch(5), Epoch(7)]);
        let (reused, _) = reuse.split(("agg", 0, Epoch(7)), Some(Epoch(6)), state.clone());
        assert!(reused.is_empty(), "a failed epoch's files are forgotten");
        reuse.forget_before(Epoch(6));
        let (reused, fresh) = reuse.split(("agg", 0, Epoch(7)), Some(Epoch(5)), state);
        assert!(reused.is_empty(), "forgotten");
        assert_eq!(fresh.batches.len(), 1);
    }
}
