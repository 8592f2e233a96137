//! A snapshot ack as it crosses from a worker to the coordinator: a header, then the
//! state batches it lists.

use crate::error::{ClusterError, ClusterResult};
use crate::protocol::AckHeader;
use riffle_core::{Epoch, OperatorId, OperatorState, RecordBatch};
use riffle_runtime::SnapshotAck;
use std::time::Duration;

/// Splits `ack` into its header and its state batches, in the header's order.
pub fn split(ack: SnapshotAck) -> (AckHeader, Vec<RecordBatch>) {
    let mut batches = Vec::new();
    let states = ack
        .states
        .into_iter()
        .map(|(id, state)| {
            let count = state.batches.len();
            batches.extend(state.batches);
            (id.0, count)
        })
        .collect();
    let header = AckHeader {
        task: ack.task.0,
        subtask: ack.subtask,
        epoch: ack.epoch.0,
        states,
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
    };
    (header, batches)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// How many state batches follow `header`.
pub fn batches_after(header: &AckHeader) -> usize {
    header.states.iter().map(|(_, n)| n).sum()
}

/// The ack `header` describes, with `batches` (exactly [`batches_after`] of them).
///
/// # Errors
/// A different number of batches than the header lists.
pub fn join(header: AckHeader, batches: Vec<RecordBatch>) -> ClusterResult<SnapshotAck> {
    if batches.len() != batches_after(&header) {
        return Err(ClusterError::Protocol(format!(
            "the ack of {}[{}] lists {} state batches but {} arrived",
            header.task,
            header.subtask,
            batches_after(&header),
            batches.len()
        )));
    }
    let mut batches = batches.into_iter();
    let states = header
        .states
        .into_iter()
        .map(|(id, count)| {
            let state = OperatorState {
                batches: batches.by_ref().take(count).collect(),
            };
            (OperatorId(id), state)
        })
        .collect();
    Ok(SnapshotAck {
        task: OperatorId(header.task),
        subtask: header.subtask,
        epoch: Epoch(header.epoch),
        states,
        committables: header.committables,
        watermark: header.watermark,
        held_watermarks: header
            .held_watermarks
            .into_iter()
            .map(|(id, w)| (OperatorId(id), w))
            .collect(),
        counters: header
            .counters
            .into_iter()
            .map(|(id, c)| (OperatorId(id), c))
            .collect(),
        alignment: Duration::from_nanos(header.alignment_nanos),
        snapshot: Duration::from_nanos(header.snapshot_nanos),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::Int64Array;
    use std::sync::Arc;

    fn batch(v: i64) -> RecordBatch {
        RecordBatch::try_from_iter([("v", Arc::new(Int64Array::from(vec![v])) as _)]).unwrap()
    }

    #[test]
    fn an_ack_comes_back_whole_with_each_operators_batches() {
        let ack = SnapshotAck {
            task: OperatorId("agg".into()),
            subtask: 2,
            epoch: Epoch(7),
            states: vec![
                (
                    OperatorId("agg".into()),
                    OperatorState {
                        batches: vec![batch(1), batch(2)],
                    },
                ),
                (OperatorId("empty".into()), OperatorState::default()),
                (
                    OperatorId("join".into()),
                    OperatorState {
                        batches: vec![batch(3)],
                    },
                ),
            ],
            committables: vec![],
            watermark: 42,
            held_watermarks: vec![(OperatorId("join".into()), 40)],
            counters: vec![],
            alignment: Duration::from_millis(3),
            snapshot: Duration::from_millis(4),
        };
        let (header, batches) = split(ack);
        assert_eq!(batches_after(&header), 3);
        let back = join(header, batches).unwrap();
        let states: Vec<(String, Vec<RecordBatch>)> = back
            .states
            .into_iter()
            .map(|(id, s)| (id.0, s.batches))
            .collect();
        assert_eq!(
            states,
            vec![
                ("agg".into(), vec![batch(1), batch(2)]),
                ("empty".into(), vec![]),
                ("join".into(), vec![batch(3)]),
            ]
        );
        assert_eq!(back.watermark, 42);
        assert_eq!(back.snapshot, Duration::from_millis(4));
    }

    #[test]
    fn missing_state_batches_are_a_protocol_error() {
        let (header, mut batches) = split(SnapshotAck {
            task: OperatorId("agg".into()),
            subtask: 0,
            epoch: Epoch(1),
            states: vec![(
                OperatorId("agg".into()),
                OperatorState {
                    batches: vec![batch(1)],
                },
            )],
            committables: vec![],
            watermark: 0,
            held_watermarks: vec![],
            counters: vec![],
            alignment: Duration::ZERO,
            snapshot: Duration::ZERO,
        });
        batches.clear();
        assert!(matches!(
            join(header, batches),
            Err(ClusterError::Protocol(_))
        ));
    }
}
