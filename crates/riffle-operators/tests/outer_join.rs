//! Outer unbounded joins: the changelog they emit, replayed (a `+I` adds a row, a `-D`
//! takes one back), must equal a brute-force outer join of every row seen — straight,
//! and through a snapshot restored into a new operator. Keys are sometimes NULL, which
//! equals nothing (not another NULL).

use riffle_core::arrow::array::{
    Array, AsArray, Int64Array, RecordBatch, TimestampNanosecondArray,
};
use riffle_core::arrow::datatypes::{DataType, Field, Int64Type};
use riffle_core::{row_kinds, Epoch, Operator, OperatorContext, OperatorFactory, StreamSchema};
use riffle_operators::StreamJoinFactory;
use std::collections::BTreeMap;
use std::sync::Arc;

fn side(key: &str, value: &str) -> StreamSchema {
    StreamSchema::with_timestamp(vec![
        Field::new(key, DataType::Int64, true),
        Field::new(value, DataType::Int64, false),
    ])
}

fn batch(schema: &StreamSchema, rows: &[Input]) -> RecordBatch {
    RecordBatch::try_new(
        schema.schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(TimestampNanosecondArray::from(vec![0; rows.len()]).with_timezone("UTC")),
        ],
    )
    .unwrap()
}

type Row = (Option<i64>, Option<i64>);

/// An input row: a key (NULL sometimes) and a value.
type Input = (Option<i64>, i64);

/// `a JOIN b ON a = b`, selecting `x` and `y`.
fn inner() -> StreamJoinFactory {
    StreamJoinFactory::new(
        &side("a", "x"),
        &side("b", "y"),
        &["a"],
        &["b"],
        &["x"],
        &["y"],
    )
    .unwrap()
}

fn join(outer: (bool, bool)) -> Box<dyn Operator> {
    inner()
        .with_outer(outer.0, outer.1)
        .unwrap()
        .create(&OperatorContext::detached("join", 0, 1))
        .unwrap()
}

/// Applies the output's changes to a multiset of (x, y) rows.
fn replay(out: &[RecordBatch], rows: &mut BTreeMap<Row, i64>) {
    for b in out {
        let kinds = row_kinds(b)
            .unwrap()
            .expect("an outer join emits row kinds");
        let x = b.column_by_name("x").unwrap().as_primitive::<Int64Type>();
        let y = b.column_by_name("y").unwrap().as_primitive::<Int64Type>();
        for (i, k) in kinds.iter().enumerate() {
            let row = (
                x.is_valid(i).then(|| x.value(i)),
                y.is_valid(i).then(|| y.value(i)),
            );
            let n = rows.entry(row).or_default();
            *n += if k.is_retraction() { -1 } else { 1 };
            assert!(*n >= 0, "withdrew {row:?}, which was not there");
        }
    }
    rows.retain(|_, n| *n != 0);
}

/// The outer join of all rows, computed directly.
fn expected(left: &[Input], right: &[Input], outer: (bool, bool)) -> BTreeMap<Row, i64> {
    let mut rows: BTreeMap<Row, i64> = BTreeMap::new();
    for &(a, x) in left {
        let mut matched = false;
        for &(b, y) in right {
            if a.is_some() && a == b {
                matched = true;
                *rows.entry((Some(x), Some(y))).or_default() += 1;
            }
        }
        if outer.0 && !matched {
            *rows.entry((Some(x), None)).or_default() += 1;
        }
    }
    for &(b, y) in right {
        if outer.1 && !left.iter().any(|&(a, _)| a.is_some() && a == b) {
            *rows.entry((None, Some(y))).or_default() += 1;
        }
    }
    rows
}

#[test]
fn outer_joins_replay_to_the_outer_join_of_every_row_through_a_restore() {
    let (ls, rs) = (side("a", "x"), side("b", "y"));
    for outer in [(true, false), (false, true), (true, true)] {
        for seed in 1..30u64 {
            let mut state = seed;
            let mut next = |m: u64| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state % m
            };
            // Batches arriving in turn, each with rows of a few keys.
            let mut inputs: Vec<(usize, Vec<Input>)> = Vec::new();
            let (mut left, mut right) = (Vec::new(), Vec::new());
            for i in 0..12 {
                let rows: Vec<Input> = (0..next(4))
                    .map(|_| {
                        let k = next(7);
                        let key = (k < 6).then_some(k as i64);
                        (key, (i * 100 + next(100)) as i64)
                    })
                    .collect();
                let s = next(2) as usize;
                if s == 0 { &mut left } else { &mut right }.extend(rows.iter().copied());
                inputs.push((s, rows));
            }
            let want = expected(&left, &right, outer);
            for restore_at in [None, Some(inputs.len() / 2)] {
                let mut op = join(outer);
                let mut out = Vec::new();
                for (i, (s, rows)) in inputs.iter().enumerate() {
                    if Some(i) == restore_at {
                        let snapshot = op.snapshot(Epoch(1)).unwrap();
                        op = join(outer);
                        op.restore(snapshot).unwrap();
                    }
                    let schema = if *s == 0 { &ls } else { &rs };
                    op.on_batch(*s, batch(schema, rows), &mut out).unwrap();
                }
                let mut got = BTreeMap::new();
                replay(&out, &mut got);
                assert_eq!(
                    got, want,
                    "outer {outer:?}, seed {seed}, restored at {restore_at:?}"
                );
            }
        }
    }
}

#[test]
fn an_outer_interval_join_is_refused() {
    let f = inner().with_retention(Some(std::time::Duration::from_secs(1)), None);
    assert!(f.with_outer(true, false).is_err());
}
