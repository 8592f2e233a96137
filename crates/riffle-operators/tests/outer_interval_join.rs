//! Interval joins, outer and inner: what the operator emits over a run of batches and watermarks
//! (through a snapshot restored into a new operator at any point) must equal a
//! brute-force outer join of every row under the time condition, and no padded row may
//! be late for the watermark the operator passed on before it.

use riffle_core::arrow::array::{
    Array, AsArray, Int64Array, RecordBatch, TimestampNanosecondArray,
};
use riffle_core::arrow::datatypes::{DataType, Field, Int64Type, TimestampNanosecondType};
use riffle_core::{Epoch, EventTime, Operator, OperatorContext, OperatorFactory, StreamSchema};
use riffle_operators::{IntervalCondition, StreamJoinFactory, TimeBound};
use std::collections::BTreeMap;
use std::sync::Arc;

const MS: i64 = 1_000_000;

fn side(key: &str, value: &str) -> StreamSchema {
    StreamSchema::with_timestamp(vec![
        Field::new(key, DataType::Int64, false),
        Field::new(value, DataType::Int64, false),
    ])
}

/// A row: key, value, event time in ms.
type Input = (i64, i64, i64);

fn batch(schema: &StreamSchema, rows: &[Input]) -> RecordBatch {
    RecordBatch::try_new(
        schema.schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(
                TimestampNanosecondArray::from_iter_values(rows.iter().map(|r| r.2 * MS))
                    .with_timezone("UTC"),
            ),
        ],
    )
    .unwrap()
}

fn bound(ms: i64, strict: bool) -> TimeBound {
    TimeBound {
        nanos: ms * MS,
        strict,
    }
}

/// The interval join of `a` and `b` on `a = b`, outer on the sides marked (neither: an
/// inner interval join, which checks the condition the same way).
fn join(outer: (bool, bool), condition: IntervalCondition) -> Box<dyn Operator> {
    let f = StreamJoinFactory::new(
        &side("a", "x"),
        &side("b", "y"),
        &["a"],
        &["b"],
        &["x"],
        &["y"],
    )
    .unwrap();
    let f = match outer {
        (false, false) => f.with_interval(condition),
        (left, right) => f.with_outer_interval(left, right, condition).unwrap(),
    };
    f.create(&OperatorContext::detached("join", 0, 1)).unwrap()
}

type Row = (Option<i64>, Option<i64>);

/// The outer interval join of all rows, computed directly.
fn expected(
    left: &[Input],
    right: &[Input],
    outer: (bool, bool),
    c: &IntervalCondition,
) -> BTreeMap<Row, i64> {
    let pairs = |l: &Input, r: &Input| l.0 == r.0 && c.holds(l.2 * MS, r.2 * MS);
    let mut rows: BTreeMap<Row, i64> = BTreeMap::new();
    for l in left {
        for r in right.iter().filter(|r| pairs(l, r)) {
            *rows.entry((Some(l.1), Some(r.1))).or_default() += 1;
        }
        if outer.0 && !right.iter().any(|r| pairs(l, r)) {
            *rows.entry((Some(l.1), None)).or_default() += 1;
        }
    }
    for r in right {
        if outer.1 && !left.iter().any(|l| pairs(l, r)) {
            *rows.entry((None, Some(r.1))).or_default() += 1;
        }
    }
    rows
}

/// The output rows as a multiset, checking none is at or behind `passed_on`.
fn collect(out: &[RecordBatch], passed_on: EventTime, rows: &mut BTreeMap<Row, i64>) {
    for b in out {
        assert!(
            riffle_core::row_kinds(b).unwrap().is_none(),
            "an outer interval join is append-only"
        );
        let x = b.column_by_name("x").unwrap().as_primitive::<Int64Type>();
        let y = b.column_by_name("y").unwrap().as_primitive::<Int64Type>();
        let ts = b
            .column(b.num_columns() - 1)
            .as_primitive::<TimestampNanosecondType>();
        for i in 0..b.num_rows() {
            let row = (
                x.is_valid(i).then(|| x.value(i)),
                y.is_valid(i).then(|| y.value(i)),
            );
            assert!(
                ts.value(i) > passed_on,
                "{row:?} at {} is late for the watermark {passed_on} passed on",
                ts.value(i)
            );
            *rows.entry(row).or_default() += 1;
        }
    }
}

#[test]
fn outer_interval_joins_equal_the_batch_answer_through_a_restore_and_are_never_late() {
    let (ls, rs) = (side("a", "x"), side("b", "y"));
    let delay = 300;
    for outer in [(false, false), (true, false), (false, true), (true, true)] {
        for seed in 1..40u64 {
            let mut state = seed;
            let mut next = |m: u64| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state % m
            };
            let lower = next(1500) as i64 - 1000;
            let condition = IntervalCondition {
                lower: bound(lower, next(2) == 0),
                upper: bound(lower + next(1500) as i64, next(2) == 0),
            };
            // Batches in roughly increasing time (jitter within the watermark delay),
            // a watermark after each.
            let mut inputs: Vec<(usize, Vec<Input>, EventTime)> = Vec::new();
            let (mut left, mut right, mut value) = (Vec::new(), Vec::new(), 0);
            let mut newest = 0;
            for i in 0..40i64 {
                let rows: Vec<Input> = (0..next(4))
                    .map(|_| {
                        value += 1;
                        let t = (i * 150 + next(delay as u64) as i64 - delay / 2).max(0);
                        (next(4) as i64, value, t)
                    })
                    .collect();
                newest = rows.iter().map(|r| r.2).fold(newest, i64::max);
                let s = next(2) as usize;
                if s == 0 { &mut left } else { &mut right }.extend(rows.iter().copied());
                inputs.push((s, rows, (newest - delay) * MS));
            }
            let want = expected(&left, &right, outer, &condition);
            for restore_at in [None, Some(next(inputs.len() as u64) as usize)] {
                let mut op = join(outer, condition);
                let mut got = BTreeMap::new();
                let mut passed_on = EventTime::MIN;
                for (i, (s, rows, watermark)) in inputs.iter().enumerate() {
                    if Some(i) == restore_at {
                        let snapshot = op.snapshot(Epoch(1)).unwrap();
                        op = join(outer, condition);
                        op.restore(snapshot).unwrap();
                    }
                    let schema = if *s == 0 { &ls } else { &rs };
                    let mut out = Vec::new();
                    op.on_batch(*s, batch(schema, rows), &mut out).unwrap();
                    op.on_watermark(*watermark, &mut out).unwrap();
                    collect(&out, passed_on, &mut got);
                    passed_on = passed_on.max(op.output_watermark(*watermark));
                    assert!(passed_on <= *watermark);
                }
                let mut out = Vec::new();
                op.on_watermark(EventTime::MAX, &mut out).unwrap();
                collect(&out, passed_on, &mut got);
                assert_eq!(op.output_watermark(EventTime::MAX), EventTime::MAX);
                assert_eq!(
                    got, want,
                    "outer {outer:?}, seed {seed}, {condition:?}, restored at {restore_at:?}"
                );
            }
        }
    }
}

#[test]
fn an_outer_interval_join_holds_the_watermark_before_its_oldest_unpadded_row() {
    let ls = side("a", "x");
    let c = IntervalCondition {
        lower: bound(-1000, false),
        upper: bound(1000, false),
    };
    let mut op = join((true, false), c);
    let mut out = Vec::new();
    op.on_batch(0, batch(&ls, &[(1, 1, 5_000)]), &mut out)
        .unwrap();
    op.on_watermark(5_500 * MS, &mut out).unwrap();
    assert!(out.is_empty(), "a right row may still come within 1 s");
    assert_eq!(op.output_watermark(5_500 * MS), 5_000 * MS - 1);
    // Past the bound (and a compaction step later), the row leaves padded.
    op.on_watermark(7_000 * MS, &mut out).unwrap();
    let rows: usize = out.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(rows, 1);
    assert!(out[0].column_by_name("y").unwrap().is_null(0));
    assert_eq!(op.output_watermark(7_000 * MS), 7_000 * MS);
}
