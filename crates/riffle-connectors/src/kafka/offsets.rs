//! A Kafka source's position as operator state: one row per partition with the next
//! offset, the bounded stop offset and the newest event time read.

use riffle_core::arrow::array::{Array, AsArray, Int32Array, Int64Array, StringArray, UInt16Array};
use riffle_core::arrow::datatypes::{DataType, Field, Int32Type, Int64Type, Schema, SchemaRef};
use riffle_core::state::KEY_GROUP_FIELD;
use riffle_core::{Error, EventTime, OperatorState, RecordBatch, Result};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where one partition is.
#[derive(Debug, Clone, Copy)]
pub(super) struct PartitionPosition {
    /// The next offset to read.
    pub next: i64,
    /// Where a bounded source stops (exclusive).
    pub stop: Option<i64>,
    /// The newest event time read from it.
    pub newest: EventTime,
}

impl PartitionPosition {
    /// A bounded partition read to its stop offset.
    pub fn done(&self) -> bool {
        self.stop.is_some_and(|stop| self.next >= stop)
    }
}

fn state_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(KEY_GROUP_FIELD, DataType::UInt16, false),
        Field::new("topic", DataType::Utf8, false),
        Field::new("partition", DataType::Int32, false),
        Field::new("next_offset", DataType::Int64, false),
        Field::new("stop_offset", DataType::Int64, true),
        Field::new("newest_event_time", DataType::Int64, false),
    ]))
}

/// The positions of `topic`'s partitions as a state batch.
pub(super) fn encode_positions(
    topic: &str,
    positions: &BTreeMap<i32, PartitionPosition>,
) -> Result<RecordBatch> {
    let n = positions.len();
    Ok(RecordBatch::try_new(
        state_schema(),
        vec![
            Arc::new(UInt16Array::from(vec![0u16; n])),
            Arc::new(StringArray::from(vec![topic; n])),
            Arc::new(Int32Array::from(
                positions.keys().copied().collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                positions.values().map(|p| p.next).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                positions.values().map(|p| p.stop).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                positions.values().map(|p| p.newest).collect::<Vec<_>>(),
            )),
        ],
    )?)
}

/// Reads what [`encode_positions`] wrote, for every partition in `state` (all old
/// subtasks' rows after a rescale); rows of another topic are an error.
pub(super) fn decode_positions(
    state: &OperatorState,
    topic: &str,
) -> Result<BTreeMap<i32, PartitionPosition>> {
    let bad = |message: String| Error::State {
        operator: format!("kafka source of `{topic}`"),
        message,
    };
    let mut positions = BTreeMap::new();
    for batch in &state.batches {
        let column = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or_else(|| bad(format!("the offsets lack column `{name}`")))
        };
        let topics = column("topic")?
            .as_string_opt::<i32>()
            .ok_or_else(|| bad("topic is not text".into()))?;
        let partitions = column("partition")?
            .as_primitive_opt::<Int32Type>()
            .ok_or_else(|| bad("partition is not INT".into()))?;
        let int64 = |name: &str| {
            column(name)?
                .as_primitive_opt::<Int64Type>()
                .cloned()
                .ok_or_else(|| bad(format!("{name} is not BIGINT")))
        };
        let (next, stop, newest) = (
            int64("next_offset")?,
            int64("stop_offset")?,
            int64("newest_event_time")?,
        );
        for row in 0..batch.num_rows() {
            if topics.value(row) != topic {
                return Err(bad(format!(
                    "the checkpoint read topic `{}`, this table reads `{topic}`",
                    topics.value(row)
                )));
            }
            let position = PartitionPosition {
                next: next.value(row),
                stop: stop.is_valid(row).then(|| stop.value(row)),
                newest: newest.value(row),
            };
            merge_position(&mut positions, partitions.value(row), position);
        }
    }
    Ok(positions)
}

/// Adds `position` of `partition`, where old subtasks' rows may both name it: a
/// position only moves forward, so the one further on is the partition's reader's and
/// any other a copy taken before that reader moved (reading from it again would
/// repeat records).
fn merge_position(
    positions: &mut BTreeMap<i32, PartitionPosition>,
    partition: i32,
    position: PartitionPosition,
) {
    match positions.get(&partition) {
        Some(held) if held.next >= position.next => {}
        _ => {
            positions.insert(partition, position);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn position(next: i64) -> PartitionPosition {
        PartitionPosition {
            next,
            stop: None,
            newest: next * 10,
        }
    }

    #[test]
    fn a_partition_named_by_two_old_subtasks_resumes_from_the_further_position() {
        // Old subtask 0 read partition 1 up to 90; old subtask 1 still held the copy it
        // restored at 40 (it had not started). In either order, 90 wins.
        let reader = BTreeMap::from([(1, position(90)), (0, position(7))]);
        let stale = BTreeMap::from([(1, position(40)), (0, position(3))]);
        for order in [[&reader, &stale], [&stale, &reader]] {
            let state = OperatorState::of(
                order
                    .iter()
                    .map(|p| encode_positions("bids", p).unwrap())
                    .collect(),
            );
            let merged = decode_positions(&state, "bids").unwrap();
            assert_eq!(merged[&1].next, 90);
            assert_eq!(merged[&1].newest, 900);
            assert_eq!(merged[&0].next, 7);
        }
    }
}
