//! OVER aggregations over a stream against a reference: every row leaves once with the
//! aggregates of its frame (rows of its partition in event-time order, ties in the
//! order of their values), for ROWS, RANGE and UNBOUNDED frames, several batch sizes,
//! out-of-order input, and across snapshots and restores.

use crate::common;

use common::{drive, drive_checkpointed, rows, schema, to_batch, Row};
use riffle_core::arrow::array::{Array, AsArray};
use riffle_core::arrow::datatypes::{DataType, Int64Type, TimestampNanosecondType};
use riffle_core::RecordBatch;
use riffle_operators::{OverAggregate, OverAggregateFactory, OverFrame, OverFunction, OverInput};
use std::time::Duration;

/// (k, v, s, ts, sum, count(*), max) per output row, sorted.
type Out = Vec<(i64, Option<i64>, String, i64, Option<i64>, i64, Option<i64>)>;

fn outputs(batches: &[RecordBatch]) -> Out {
    let mut out = Out::new();
    for b in batches {
        let int = |n: &str| {
            b.column_by_name(n)
                .unwrap()
                .as_primitive::<Int64Type>()
                .clone()
        };
        let (k, v, sum, n, max) = (int("k"), int("v"), int("sum"), int("n"), int("max"));
        let s = b.column_by_name("s").unwrap().as_string::<i32>().clone();
        let ts = b
            .column_by_name("_timestamp")
            .unwrap()
            .as_primitive::<TimestampNanosecondType>()
            .clone();
        let opt =
            |a: &riffle_core::arrow::array::Int64Array, r: usize| a.is_valid(r).then(|| a.value(r));
        for r in 0..b.num_rows() {
            out.push((
                k.value(r),
                opt(&v, r),
                s.value(r).to_string(),
                ts.value(r),
                opt(&sum, r),
                n.value(r),
                opt(&max, r),
            ));
        }
    }
    out.sort();
    out
}

/// The frames computed directly: per partition, rows sorted by (ts, v with NULL
/// first, s) — the operator's order for rows of one time within one partition.
fn reference(input: &[Row], frame: OverFrame) -> Out {
    let mut out = Out::new();
    let mut keys: Vec<i64> = input.iter().map(|r| r.k).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        let mut part: Vec<&Row> = input.iter().filter(|r| r.k == k).collect();
        part.sort_by(|a, b| (a.ts, a.v, &a.s).cmp(&(b.ts, b.v, &b.s)));
        for (i, row) in part.iter().enumerate() {
            let in_frame: Vec<&&Row> = match frame {
                OverFrame::Rows(Some(n)) => part[i.saturating_sub(n)..=i].iter().collect(),
                OverFrame::Rows(None) => part[..=i].iter().collect(),
                // RANGE: every row within `d` before, and every row of the same time.
                OverFrame::Range(d) => {
                    let from = d.map_or(i64::MIN, |d| row.ts - d.as_nanos() as i64);
                    part.iter()
                        .filter(|r| r.ts >= from && r.ts <= row.ts)
                        .collect()
                }
            };
            let values: Vec<i64> = in_frame.iter().filter_map(|r| r.v).collect();
            out.push((
                k,
                row.v,
                row.s.clone(),
                row.ts,
                (!values.is_empty()).then(|| values.iter().sum()),
                in_frame.len() as i64,
                values.iter().max().copied(),
            ));
        }
    }
    out.sort();
    out
}

fn factory(frame: OverFrame) -> OverAggregateFactory {
    let agg = |function, input: Option<&str>, output: &str| OverAggregate {
        function,
        input: input.map(str::to_string),
        output: output.into(),
        output_type: DataType::Int64,
    };
    let aggregates = [
        agg(OverFunction::Sum, Some("v"), "sum"),
        agg(OverFunction::CountStar, None, "n"),
        agg(OverFunction::Max, Some("v"), "max"),
    ];
    OverAggregateFactory::new(&schema(), &["k"], frame, &aggregates, OverInput::EventTime).unwrap()
}

#[test]
fn every_row_leaves_once_with_its_frame_whatever_the_batches_and_restores() {
    let frames = [
        OverFrame::Rows(Some(3)),
        OverFrame::Rows(None),
        OverFrame::Range(Some(Duration::from_millis(25))),
        OverFrame::Range(None),
    ];
    for seed in [1u64, 2] {
        // 10 ms a row with up to 30 ms of disorder, read with a 40 ms delay: no row is
        // late, and rows of one time (a jitter collision) occur.
        let input = rows(seed, 300, 4, 30);
        for frame in frames {
            let expected = reference(&input, frame);
            for size in [1usize, 13, 300] {
                let batches: Vec<_> = input
                    .chunks(size)
                    .map(|c| (0, to_batch(&schema(), c)))
                    .collect();
                let delay = 40_000_000;
                let whole = outputs(&drive(&factory(frame), &batches, delay, None));
                assert_eq!(whole, expected, "seed {seed}, {frame:?}, batch {size}");
                let half = batches.len() / 2;
                let restored = outputs(&drive(&factory(frame), &batches, delay, Some(half)));
                assert_eq!(
                    restored, expected,
                    "seed {seed}, {frame:?}, batch {size}, restored"
                );
                let checkpointed =
                    outputs(&drive_checkpointed(&factory(frame), &batches, delay, half));
                assert_eq!(
                    checkpointed, expected,
                    "seed {seed}, {frame:?}, batch {size}, checkpointed"
                );
            }
        }
    }
}
