//! A snapshot ack as it crosses from a worker to the coordinator. The worker writes its
//! subtasks' state files to the shared store itself; the ack names the files, so state
//! never passes through worker 0 (docs/cluster.md, "One checkpoint across workers").

use crate::error::ClusterResult;
use crate::protocol::AckHeader;
use riffle_core::{Epoch, OperatorId};
use riffle_runtime::{may_reuse_previous, write_ack_state, FileReuse, SnapshotAck};
use riffle_state::manifest::FileEntry;
use riffle_state::CheckpointStore;
use std::time::Duration;

/// Writes the state `ack` carries to `store` as files of `generation` (by the one
/// writer, [`write_ack_state`]), and returns the ack as the coordinator takes it: the
/// files instead of the batches. A stable-state snapshot references the files of the
/// epoch before where its batches did not change, once this worker `heard_committed`
/// that epoch (see [`may_reuse_previous`]).
///
/// A late ack, of an epoch older than one already written ([`FileReuse::is_late`]),
/// is dropped (`None`), as the coordinator passes one over: its epoch ended without it,
/// and the files it may reference can be forgotten (written, it would fail the attempt
/// with `NotHeld`; a subtask slow to restore sends one after its first epoch timed out).
///
/// # Errors
/// Writing a state file failed.
pub async fn write_state(
    (store, generation): (&CheckpointStore, u64),
    reuse: &mut FileReuse,
    heard_committed: Option<Epoch>,
    mut ack: SnapshotAck,
) -> ClusterResult<Option<AckHeader>> {
    if reuse.is_late(ack.epoch) {
        tracing::debug!(epoch = %ack.epoch, subtask = ack.subtask, "late ack dropped");
        return Ok(None);
    }
    let previous = Epoch(ack.epoch.0.saturating_sub(1));
    let committed = reuse.committed_or_restored(heard_committed);
    let reusable = may_reuse_previous(ack.epoch, committed).then_some(previous);
    reuse.forget_before(previous);
    write_ack_state((store, generation), reuse, reusable, &mut ack).await?;
    Ok(Some(header(ack)))
}

/// The header of an ack whose state is already written (`ack.states` is left out).
pub fn header(ack: SnapshotAck) -> AckHeader {
    AckHeader {
        task: ack.task.0,
        subtask: ack.subtask,
        epoch: ack.epoch.0,
        written: ack
            .written
            .into_iter()
            .map(|(id, files)| (id.0, files))
            .collect(),
        committables: ack.committables,
        watermark: ack.watermark,
        held_watermarks: ack
            .held_watermarks
            .into_iter()
            .map(|(id, w)| (id.0, w))
            .collect(),
        counters: ack.counters.into_iter().map(|(id, c)| (id.0, c)).collect(),
        alignment_nanos: nanos(ack.alignment),
        snapshot_nanos: nanos(ack.snapshot),
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The ack `header` describes, for the coordinator.
pub fn ack(header: AckHeader) -> SnapshotAck {
    let ids = |v: Vec<(String, i64)>| v.into_iter().map(|(id, w)| (OperatorId(id), w)).collect();
    SnapshotAck {
        task: OperatorId(header.task),
        subtask: header.subtask,
        epoch: Epoch(header.epoch),
        states: Vec::new(),
        committables: header.committables,
        watermark: header.watermark,
        held_watermarks: ids(header.held_watermarks),
        counters: header
            .counters
            .into_iter()
            .map(|(id, c)| (OperatorId(id), c))
            .collect(),
        alignment: Duration::from_nanos(header.alignment_nanos),
        snapshot: Duration::from_nanos(header.snapshot_nanos),
        written: header
            .written
            .into_iter()
            .map(|(id, files): (String, Vec<FileEntry>)| (OperatorId(id), files))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::Int64Array;
    use riffle_core::{OperatorState, RecordBatch};
    use std::sync::Arc;

    fn state(values: &[i64]) -> OperatorState {
        let column = Arc::new(Int64Array::from(values.to_vec())) as _;
        let key_group = Arc::new(riffle_core::arrow::array::UInt16Array::from(
            values.iter().map(|_| 0u16).collect::<Vec<_>>(),
        )) as _;
        OperatorState::of(vec![RecordBatch::try_from_iter([
            (riffle_core::state::KEY_GROUP_FIELD, key_group),
            ("v", column),
        ])
        .unwrap()])
    }

    #[tokio::test]
    async fn a_worker_writes_its_state_and_the_ack_names_the_files_but_drops_a_late_ack() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().display());
        let store = CheckpointStore::new(riffle_state::StateRoot::parse(&url).unwrap(), "p");
        let ack = |epoch| SnapshotAck {
            task: OperatorId("agg".into()),
            subtask: 2,
            epoch: Epoch(epoch),
            states: vec![
                (OperatorId("agg".into()), state(&[1, 2, 3])),
                (OperatorId("empty".into()), OperatorState::default()),
            ],
            committables: vec![],
            watermark: 42,
            held_watermarks: vec![(OperatorId("agg".into()), 40)],
            counters: vec![],
            alignment: Duration::from_millis(3),
            snapshot: Duration::from_millis(4),
            written: vec![],
        };
        let graph = riffle_runtime::JobGraph::new("p");
        let mut reuse = FileReuse::new(&graph);
        let header = write_state((&store, 5), &mut reuse, None, ack(7))
            .await
            .unwrap()
            .expect("written");
        // Epoch 6's ack after epoch 7's: that epoch ended without it.
        let dropped = write_state((&store, 5), &mut reuse, None, ack(6))
            .await
            .unwrap();
        assert!(dropped.is_none());
        let json = serde_json::to_string(&header).unwrap();
        let back = super::ack(serde_json::from_str(&json).unwrap());
        assert!(
            back.states.is_empty(),
            "no batches cross to the coordinator"
        );
        let written: Vec<(&str, u64)> = back
            .written
            .iter()
            .map(|(id, files)| (id.0.as_str(), files.iter().map(|f| f.rows).sum()))
            .collect();
        assert_eq!(written, vec![("agg", 3), ("empty", 0)]);
        let file = &back.written[0].1[0];
        assert!(
            dir.path().join("p").join(&file.path).exists(),
            "{} was not written",
            file.path
        );
        assert_eq!(back.held_watermarks, vec![(OperatorId("agg".into()), 40)]);
        assert_eq!(back.snapshot, Duration::from_millis(4));
    }
}
