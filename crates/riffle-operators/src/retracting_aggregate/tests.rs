//! Named behaviours of the aggregate over a changelog.

use super::*;
use crate::aggregate::AggregateFunction;
use riffle_core::arrow::array::{Array, AsArray, Float64Array, TimestampNanosecondArray};
use riffle_core::arrow::datatypes::Float64Type;
use riffle_core::row_kind_field;
use std::collections::BTreeMap;

fn input() -> StreamSchema {
    StreamSchema::with_timestamp(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("v", DataType::Int64, true),
        row_kind_field(),
    ])
}

fn batch(rows: &[(RowKind, i64, Option<i64>)]) -> RecordBatch {
    RecordBatch::try_new(
        input().schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.2))),
            Arc::new(row_kind_array(rows.iter().map(|r| r.0))),
            Arc::new(TimestampNanosecondArray::from(vec![0; rows.len()]).with_timezone("UTC")),
        ],
    )
    .unwrap()
}

fn specs() -> Vec<AggregateSpec> {
    vec![
        AggregateSpec::count_star("rows"),
        AggregateSpec::new(AggregateFunction::Count, "v", "n"),
        AggregateSpec::new(AggregateFunction::Sum, "v", "total"),
        AggregateSpec::new(AggregateFunction::Avg, "v", "mean"),
        AggregateSpec::new(AggregateFunction::Min, "v", "lo"),
        AggregateSpec::new(AggregateFunction::Max, "v", "hi"),
    ]
}

fn operator() -> Box<dyn Operator> {
    RetractingAggregateFactory::new(&input(), &["k"], specs())
        .unwrap()
        .create(&OperatorContext::detached("agg", 0, 1))
        .unwrap()
}

type Change = (
    &'static str,
    i64,
    i64,
    i64,
    Option<i64>,
    Option<f64>,
    Option<i64>,
    Option<i64>,
);

/// Every output row as (kind, k, rows, n, total, mean, lo, hi).
fn changes(out: &[RecordBatch]) -> Vec<Change> {
    let mut all = Vec::new();
    for b in out {
        let kinds = row_kinds(b).unwrap().unwrap();
        let int = |n: &str| {
            b.column_by_name(n)
                .unwrap()
                .as_primitive::<Int64Type>()
                .clone()
        };
        let (k, rows, n) = (int("k"), int("rows"), int("n"));
        let (total, lo, hi) = (int("total"), int("lo"), int("hi"));
        let mean: Float64Array = b
            .column_by_name("mean")
            .unwrap()
            .as_primitive::<Float64Type>()
            .clone();
        let opt = |a: &Int64Array, i: usize| a.is_valid(i).then(|| a.value(i));
        for (i, kind) in kinds.iter().enumerate() {
            let mean = mean.is_valid(i).then(|| mean.value(i));
            all.push((
                kind.short(),
                k.value(i),
                rows.value(i),
                n.value(i),
                opt(&total, i),
                mean,
                opt(&lo, i),
                opt(&hi, i),
            ));
        }
    }
    all
}

#[test]
fn withdrawn_rows_are_taken_back_and_an_emptied_group_is_deleted() {
    use RowKind::*;
    let mut op = operator();
    let mut out = Vec::new();
    op.on_batch(
        0,
        batch(&[
            (Insert, 1, Some(4)),
            (Insert, 1, None),
            (UpdateAfter, 2, Some(6)),
        ]),
        &mut out,
    )
    .unwrap();
    op.on_batch(
        0,
        batch(&[(UpdateBefore, 1, Some(4)), (UpdateAfter, 1, Some(8))]),
        &mut out,
    )
    .unwrap();
    op.on_batch(0, batch(&[(Delete, 2, Some(6))]), &mut out)
        .unwrap();
    op.on_batch(
        0,
        batch(&[(UpdateBefore, 1, None), (UpdateBefore, 1, Some(8))]),
        &mut out,
    )
    .unwrap();
    assert_eq!(
        changes(&out),
        [
            ("+I", 1, 2, 1, Some(4), Some(4.0), Some(4), Some(4)),
            ("+I", 2, 1, 1, Some(6), Some(6.0), Some(6), Some(6)),
            ("-U", 1, 2, 1, Some(4), Some(4.0), Some(4), Some(4)),
            ("+U", 1, 2, 1, Some(8), Some(8.0), Some(8), Some(8)),
            ("-D", 2, 1, 1, Some(6), Some(6.0), Some(6), Some(6)),
            ("-D", 1, 2, 1, Some(8), Some(8.0), Some(8), Some(8)),
        ]
    );
}

#[test]
fn taking_back_more_than_was_given_is_an_error_not_a_negative_count() {
    let mut op = operator();
    let mut out = Vec::new();
    let e = op.on_batch(0, batch(&[(RowKind::Delete, 1, Some(4))]), &mut out);
    assert!(e.is_err());
}

#[test]
fn count_distinct_counts_a_value_while_any_row_holds_it() {
    use RowKind::*;
    let spec = vec![AggregateSpec::new(
        AggregateFunction::CountDistinct,
        "v",
        "d",
    )];
    let mut op = RetractingAggregateFactory::new(&input(), &["k"], spec)
        .unwrap()
        .create(&OperatorContext::detached("agg", 0, 1))
        .unwrap();
    let mut out = Vec::new();
    let steps: [&[(RowKind, i64, Option<i64>)]; 3] = [
        &[
            (Insert, 1, Some(1)),
            (Insert, 1, Some(1)),
            (Insert, 1, Some(2)),
            (Insert, 1, None),
        ],
        &[(Delete, 1, Some(1))],
        &[(Delete, 1, Some(1))],
    ];
    let mut last = Vec::new();
    for rows in steps {
        out.clear();
        op.on_batch(0, batch(rows), &mut out).unwrap();
        let b = out.last().unwrap();
        last.push(
            b.column_by_name("d")
                .unwrap()
                .as_primitive::<Int64Type>()
                .value(0),
        );
    }
    assert_eq!(last, [2, 2, 1]);
}

#[test]
fn two_count_distinct_of_one_column_and_an_append_only_input_are_refused() {
    let spec = vec![
        AggregateSpec::new(AggregateFunction::CountDistinct, "v", "x"),
        AggregateSpec::new(AggregateFunction::CountDistinct, "v", "y"),
    ];
    let e = RetractingAggregateFactory::new(&input(), &["k"], spec)
        .err()
        .unwrap();
    assert!(e.to_string().contains("count(DISTINCT"), "{e}");
    let appended = StreamSchema::with_timestamp(vec![Field::new("k", DataType::Int64, false)]);
    assert!(RetractingAggregateFactory::new(
        &appended,
        &["k"],
        vec![AggregateSpec::count_star("c")]
    )
    .is_err());
}

/// A random changelog of a table of (k, v) rows: each step inserts a row, or withdraws
/// or replaces a live one. Returns the batches and the live rows at the end.
fn random_changelog(seed: u64, steps: usize) -> (Vec<RecordBatch>, Vec<(i64, Option<i64>)>) {
    let mut x = seed | 1;
    let mut next = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let mut live: Vec<(i64, Option<i64>)> = Vec::new();
    let mut batches = Vec::new();
    let mut rows = Vec::new();
    for _ in 0..steps {
        let value = |r: u64| (!r.is_multiple_of(7)).then_some(r as i64 % 50 - 10);
        match next(3) {
            0 | 1 if !live.is_empty() => {
                let at = next(live.len() as u64) as usize;
                let (k, v) = live.swap_remove(at);
                if next(2) == 0 {
                    rows.push((RowKind::Delete, k, v));
                } else {
                    let nv = value(next(1000));
                    rows.push((RowKind::UpdateBefore, k, v));
                    rows.push((RowKind::UpdateAfter, k, nv));
                    live.push((k, nv));
                }
            }
            _ => {
                let (k, v) = (next(6) as i64, value(next(1000)));
                rows.push((RowKind::Insert, k, v));
                live.push((k, v));
            }
        }
        if next(5) == 0 {
            batches.push(batch(&rows));
            rows.clear();
        }
    }
    batches.push(batch(&rows));
    (batches, live)
}

/// The live rows per key once the output changelog is replayed.
fn replay(changes: &[Change]) -> BTreeMap<i64, Change> {
    let mut now = BTreeMap::new();
    for c in changes {
        let values = |c: &Change| (c.1, c.2, c.3, c.4, c.5, c.6, c.7);
        if c.0.starts_with('-') {
            let old = now.remove(&c.1);
            assert_eq!(
                old.as_ref().map(values),
                Some(values(c)),
                "withdrew a row that was not current"
            );
        } else {
            assert!(
                now.insert(c.1, *c).is_none(),
                "added a row over a current one: {c:?}"
            );
        }
    }
    now
}

#[test]
fn the_output_changelog_replays_to_the_aggregate_of_the_live_rows_through_snapshots() {
    for seed in 1..20u64 {
        let (batches, live) = random_changelog(seed, 300);
        // Per key: rows, values, sum, min, max of the live rows.
        type Expected = (i64, i64, i64, Option<i64>, Option<i64>);
        let mut expected: BTreeMap<i64, Expected> = BTreeMap::new();
        for (k, v) in &live {
            let e = expected.entry(*k).or_default();
            e.0 += 1;
            if let Some(v) = v {
                e.1 += 1;
                e.2 += v;
                e.3 = Some(e.3.map_or(*v, |m| m.min(*v)));
                e.4 = Some(e.4.map_or(*v, |m| m.max(*v)));
            }
        }
        // Straight, and with a snapshot and restore into a new operator halfway.
        for restore_at in [None, Some(batches.len() / 2)] {
            let mut op = operator();
            let mut out = Vec::new();
            for (i, b) in batches.iter().enumerate() {
                if Some(i) == restore_at {
                    let state = op.snapshot(Epoch(1)).unwrap();
                    op = operator();
                    op.restore(state).unwrap();
                }
                op.on_batch(0, b.clone(), &mut out).unwrap();
            }
            let got: BTreeMap<i64, Expected> = replay(&changes(&out))
                .into_values()
                .map(|c| (c.1, (c.2, c.3, c.4.unwrap_or(0), c.6, c.7)))
                .collect();
            assert_eq!(got, expected, "seed {seed}, restored at {restore_at:?}");
        }
    }
}

#[test]
fn a_distinct_row_lives_while_any_row_holds_it() {
    use RowKind::*;
    let mut op = RetractingAggregateFactory::new(&input(), &["k"], Vec::new())
        .unwrap()
        .create(&OperatorContext::detached("agg", 0, 1))
        .unwrap();
    let mut live = std::collections::BTreeSet::new();
    let steps: [&[(RowKind, i64, Option<i64>)]; 3] = [
        &[
            (Insert, 1, Some(1)),
            (Insert, 1, Some(2)),
            (Insert, 2, None),
        ],
        &[(Delete, 1, Some(1)), (Delete, 2, None)],
        &[(Delete, 1, Some(2))],
    ];
    let mut after = Vec::new();
    for rows in steps {
        let mut out = Vec::new();
        op.on_batch(0, batch(rows), &mut out).unwrap();
        for b in &out {
            let k = b.column_by_name("k").unwrap().as_primitive::<Int64Type>();
            for (i, kind) in row_kinds(b).unwrap().unwrap().iter().enumerate() {
                if kind.is_retraction() {
                    assert!(
                        live.remove(&k.value(i)),
                        "withdrew {} not there",
                        k.value(i)
                    );
                } else {
                    assert!(live.insert(k.value(i)), "added {} twice", k.value(i));
                }
            }
        }
        after.push(live.iter().copied().collect::<Vec<_>>());
    }
    assert_eq!(after, [vec![1, 2], vec![1], vec![]]);
}
