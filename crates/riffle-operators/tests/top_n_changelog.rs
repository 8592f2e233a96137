//! Top-N as a changelog, over append-only rows and over a changelog: the output replayed
//! (each `-U`/`-D` withdrawing the row its rank holds, each `+I`/`+U` filling an empty
//! rank) is the first N live rows of each partition, straight and across snapshots.

use crate::common;

use common::{drive, drive_checkpointed, rows, schema, to_batch, Rng};
use riffle_core::arrow::array::{Array, ArrayRef, AsArray, Int64Array, TimestampNanosecondArray};
use riffle_core::arrow::datatypes::{DataType, Field, Int64Type};
use riffle_core::{
    row_kind_array, row_kind_field, row_kinds, OperatorFactory, RecordBatch, RowKind, StreamSchema,
};
use riffle_operators::{OrderColumn, TopNFactory};
use std::collections::BTreeMap;
use std::sync::Arc;

/// (partition, rank) → value there.
type Ranks = BTreeMap<(i64, i64), Option<i64>>;

fn by_v_desc() -> [OrderColumn; 1] {
    [OrderColumn {
        column: "v".into(),
        descending: true,
        nulls_first: false,
    }]
}

/// Replays a Top-N's changelog; panics on a withdrawal of a row the rank does not hold
/// or an addition over a held rank.
fn replay(batches: &[RecordBatch]) -> Ranks {
    let mut now = Ranks::new();
    for b in batches {
        let kinds = row_kinds(b).unwrap().expect("a changelog has row kinds");
        let int = |n: &str| {
            b.column_by_name(n)
                .unwrap()
                .as_primitive::<Int64Type>()
                .clone()
        };
        let (k, v, rank) = (int("k"), int("v"), int("rank"));
        for (r, kind) in kinds.iter().enumerate() {
            let at = (k.value(r), rank.value(r));
            let value = (!v.is_null(r)).then(|| v.value(r));
            if kind.is_retraction() {
                assert_eq!(now.remove(&at), Some(value), "{kind:?} of {at:?}");
            } else {
                assert!(
                    now.insert(at, value).is_none(),
                    "{kind:?} over a held {at:?}"
                );
            }
        }
    }
    now
}

/// The first `n` values per partition, largest first, NULLs last.
fn top(live: &[(i64, Option<i64>)], n: usize) -> Ranks {
    let mut per: BTreeMap<i64, Vec<Option<i64>>> = BTreeMap::new();
    for (k, v) in live {
        per.entry(*k).or_default().push(*v);
    }
    let mut out = Ranks::new();
    for (k, mut values) in per {
        values.sort_by_key(|v| std::cmp::Reverse(v.map_or(i64::MIN, |v| v + 1)));
        for (i, v) in values.into_iter().take(n).enumerate() {
            out.insert((k, i as i64 + 1), v);
        }
    }
    out
}

#[test]
fn over_appended_rows_the_changelog_replays_to_the_top_n() {
    for seed in [1u64, 2, 3] {
        let input = rows(seed, 400, 7, 0);
        let live: Vec<_> = input.iter().map(|r| (r.k, r.v)).collect();
        for n in [1usize, 3] {
            let f = TopNFactory::new(&schema(), &["k"], &by_v_desc(), n, "rank")
                .unwrap()
                .changelog();
            for size in [1usize, 13, 400] {
                let batches: Vec<_> = input
                    .chunks(size)
                    .map(|c| (0, to_batch(&schema(), c)))
                    .collect();
                let mid = batches.len() / 2;
                for out in [
                    drive(&f, &batches, 0, None),
                    drive_checkpointed(&f, &batches, 0, mid),
                ] {
                    assert_eq!(replay(&out), top(&live, n), "seed {seed} n {n} size {size}");
                }
            }
        }
    }
}

fn changelog_schema() -> StreamSchema {
    StreamSchema::with_timestamp(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("v", DataType::Int64, true),
        row_kind_field(),
    ])
}

fn changes(rows: &[(RowKind, i64, Option<i64>)], ts: i64) -> RecordBatch {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.2))),
        Arc::new(row_kind_array(rows.iter().map(|r| r.0))),
        Arc::new(TimestampNanosecondArray::from(vec![ts; rows.len()]).with_timezone("UTC")),
    ];
    RecordBatch::try_new(changelog_schema().schema, columns).unwrap()
}

/// A live (k, v) row.
type Live = (i64, Option<i64>);

/// A random changelog of (k, v) rows: inserts, deletes and updates of live rows.
fn random_changes(seed: u64, steps: usize) -> (Vec<(usize, RecordBatch)>, Vec<Live>) {
    let mut rng = Rng(seed);
    let mut live: Vec<(i64, Option<i64>)> = Vec::new();
    let (mut batches, mut pending) = (Vec::new(), Vec::new());
    for step in 0..steps {
        let value = |x: u64| (!x.is_multiple_of(9)).then_some(x as i64 % 40);
        if !live.is_empty() && rng.below(5) < 2 {
            let (k, v) = live.swap_remove(rng.below(live.len() as u64) as usize);
            if rng.below(2) == 0 {
                pending.push((RowKind::Delete, k, v));
            } else {
                let nv = value(rng.next());
                pending.push((RowKind::UpdateBefore, k, v));
                pending.push((RowKind::UpdateAfter, k, nv));
                live.push((k, nv));
            }
        } else {
            let (k, v) = (rng.below(4) as i64, value(rng.next()));
            pending.push((RowKind::Insert, k, v));
            live.push((k, v));
        }
        if rng.below(6) == 0 {
            batches.push((0, changes(&pending, step as i64)));
            pending.clear();
        }
    }
    batches.push((0, changes(&pending, steps as i64)));
    (batches, live)
}

#[test]
fn over_a_changelog_a_withdrawn_top_row_gives_its_rank_to_the_next() {
    for seed in 1..30u64 {
        let (batches, live) = random_changes(seed, 250);
        for n in [1usize, 2, 5] {
            let f = TopNFactory::new(&changelog_schema(), &["k"], &by_v_desc(), n, "rank").unwrap();
            assert!(f.is_changelog(), "a Top-N over a changelog emits one");
            let mid = batches.len() / 2;
            for out in [
                drive(&f, &batches, 0, None),
                drive(&f, &batches, 0, Some(mid)),
                drive_checkpointed(&f, &batches, 0, mid),
            ] {
                assert_eq!(replay(&out), top(&live, n), "seed {seed} n {n}");
            }
        }
    }
}

#[test]
fn emptying_a_rank_deletes_it_and_the_output_has_no_input_kind_column() {
    let f = TopNFactory::new(&changelog_schema(), &["k"], &by_v_desc(), 2, "rank").unwrap();
    let names: Vec<_> = f
        .output_schema()
        .schema
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["k", "v", "rank", "_row_kind", "_timestamp"]);
    let batches = vec![
        (
            0,
            changes(
                &[(RowKind::Insert, 1, Some(5)), (RowKind::Insert, 1, Some(3))],
                1,
            ),
        ),
        (0, changes(&[(RowKind::Delete, 1, Some(5))], 2)),
    ];
    let out = drive(&f, &batches, 0, None);
    let kinds: Vec<Vec<RowKind>> = out.iter().map(|b| row_kinds(b).unwrap().unwrap()).collect();
    // 5 leaves rank 1 to 3, and rank 2 is empty.
    assert_eq!(
        kinds,
        [
            vec![RowKind::Insert, RowKind::Insert],
            vec![RowKind::UpdateBefore, RowKind::Delete, RowKind::UpdateAfter]
        ]
    );
}

#[test]
fn withdrawing_a_row_never_inserted_is_an_error() {
    let f = TopNFactory::new(&changelog_schema(), &["k"], &by_v_desc(), 2, "rank").unwrap();
    let ctx = riffle_core::OperatorContext::detached("op", 0, 1);
    let mut op = f.create(&ctx).unwrap();
    let mut out = Vec::new();
    op.on_batch(0, changes(&[(RowKind::Insert, 1, Some(5))], 1), &mut out)
        .unwrap();
    let gone = changes(&[(RowKind::Delete, 1, Some(4))], 2);
    assert!(op.on_batch(0, gone, &mut out).is_err());
}

#[test]
fn a_window_top_n_neither_reads_nor_emits_a_changelog() {
    let f = TopNFactory::new(&changelog_schema(), &["k"], &by_v_desc(), 2, "rank").unwrap();
    assert!(f.closing_windows("k").is_err());
}
