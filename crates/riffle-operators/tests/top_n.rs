//! Top-N against a reference: the upsert stream per (partition, rank) it emits, reduced
//! to the newest row per key, is the first N rows of each partition in the order
//! (ties in arrival order), for several batch sizes and across a snapshot and restore,
//! also from a chain of incremental snapshots.

use crate::common;

use common::{drive, drive_checkpointed, rows, schema, to_batch, Row};
use riffle_core::arrow::array::{Array, AsArray};
use riffle_core::arrow::datatypes::Int64Type;
use riffle_core::{Epoch, OperatorContext, OperatorFactory, RecordBatch};
use riffle_operators::{OrderColumn, TopNFactory};
use std::collections::BTreeMap;

/// (partition, rank) → (value, label, event time) of the row there.
type Ranked = BTreeMap<(i64, i64), (Option<i64>, String, i64)>;

fn newest_per_rank(batches: &[RecordBatch]) -> Ranked {
    let mut out = Ranked::new();
    for b in batches {
        let col = |n: &str| b.column_by_name(n).unwrap().clone();
        let (k, v, s, rank) = (col("k"), col("v"), col("s"), col("rank"));
        let ts = col("_timestamp");
        for r in 0..b.num_rows() {
            let value = (!v.is_null(r)).then(|| v.as_primitive::<Int64Type>().value(r));
            out.insert(
                (
                    k.as_primitive::<Int64Type>().value(r),
                    rank.as_primitive::<Int64Type>().value(r),
                ),
                (
                    value,
                    s.as_string::<i32>().value(r).to_string(),
                    ts.as_primitive::<riffle_core::arrow::datatypes::TimestampNanosecondType>()
                        .value(r),
                ),
            );
        }
    }
    out
}

/// Top `n` by `v` descending, NULLs last, ties in arrival order.
fn reference(input: &[Row], n: usize) -> Ranked {
    let mut by_key: BTreeMap<i64, Vec<&Row>> = BTreeMap::new();
    for r in input {
        by_key.entry(r.k).or_default().push(r);
    }
    let mut out = Ranked::new();
    for (k, mut rows) in by_key {
        // A stable sort keeps arrival order among ties.
        rows.sort_by_key(|r| std::cmp::Reverse(r.v.map_or(i64::MIN, |v| v + 1)));
        for (i, r) in rows.iter().take(n).enumerate() {
            out.insert((k, i as i64 + 1), (r.v, r.s.clone(), r.ts));
        }
    }
    out
}

fn factory(n: usize) -> TopNFactory {
    let order = [OrderColumn {
        column: "v".into(),
        descending: true,
        nulls_first: false,
    }];
    TopNFactory::new(&schema(), &["k"], &order, n, "rank").unwrap()
}

#[test]
fn the_newest_row_per_rank_is_the_top_n_of_each_partition() {
    for (seed, keys) in [(1u64, 5), (2, 5), (3, 60)] {
        // Values in -300..700 over 400 rows: ties happen, NULLs too.
        let input = rows(seed, 400, keys, 0);
        for n in [1usize, 3, 10] {
            let expected = reference(&input, n);
            for size in [1usize, 7, 100, 400] {
                let batches: Vec<_> = input
                    .chunks(size)
                    .map(|c| (0, to_batch(&schema(), c)))
                    .collect();
                let got = newest_per_rank(&drive(&factory(n), &batches, 0, None));
                assert_eq!(got, expected, "seed {seed}, top {n}, batch {size}");
                let restored =
                    newest_per_rank(&drive(&factory(n), &batches, 0, Some(batches.len() / 2)));
                assert_eq!(
                    restored, expected,
                    "seed {seed}, top {n}, batch {size}, restored"
                );
                let cut = batches.len() / 2;
                let chained = newest_per_rank(&drive_checkpointed(&factory(n), &batches, 0, cut));
                assert_eq!(
                    chained, expected,
                    "seed {seed}, top {n}, batch {size}, restored from incremental snapshots"
                );
            }
        }
    }
}

#[test]
fn a_row_that_ties_keeps_the_rank_of_the_one_before_it() {
    let row = |v: i64, s: &str| Row {
        k: 1,
        v: Some(v),
        s: s.into(),
        ts: 0,
    };
    let input = vec![row(5, "first"), row(5, "second"), row(7, "best")];
    let batches = vec![(0, to_batch(&schema(), &input))];
    let got = newest_per_rank(&drive(&factory(2), &batches, 0, None));
    let labels: Vec<&str> = got.values().map(|(_, s, _)| s.as_str()).collect();
    assert_eq!(labels, ["best", "first"]);
}

#[test]
fn only_changed_ranks_are_emitted() {
    let row = |v: i64| Row {
        k: 1,
        v: Some(v),
        s: "x".into(),
        ts: 0,
    };
    // 10 fills rank 1; 3 fills rank 2; 1 is below the top 2; 5 moves 3 to rank 3's
    // place (gone) and takes rank 2.
    let batches: Vec<_> = [10, 3, 1, 5]
        .iter()
        .map(|v| (0, to_batch(&schema(), &[row(*v)])))
        .collect();
    let out = drive(&factory(2), &batches, 0, None);
    let emitted: Vec<usize> = out.iter().map(|b| b.num_rows()).collect();
    assert_eq!(emitted, [1, 1, 1]);
}

#[test]
fn a_snapshot_adds_only_the_changed_partitions_to_the_earlier_ones() {
    let row = |k: i64, v: i64| Row {
        k,
        v: Some(v),
        s: "x".into(),
        ts: 0,
    };
    let factory = factory(2);
    assert!(factory.stable_state());
    let mut op = factory
        .create(&OperatorContext::detached("op", 0, 1))
        .unwrap();
    let mut out = Vec::new();
    let first: Vec<Row> = (0..10).flat_map(|k| [row(k, 1), row(k, 2)]).collect();
    op.on_batch(0, to_batch(&schema(), &first), &mut out)
        .unwrap();
    let one = op.snapshot(Epoch(1)).unwrap();
    assert_eq!(one.rows(), 20, "every partition's two ranks");
    // Partition 3 gets a new best row; partition 4 a row below its top 2.
    op.on_batch(0, to_batch(&schema(), &[row(3, 9), row(4, 0)]), &mut out)
        .unwrap();
    let two = op.snapshot(Epoch(2)).unwrap();
    assert_eq!(two.batches.len(), 2);
    let (earlier, delta) = (&two.batches[0], &two.batches[1]);
    assert!(
        earlier
            .column(0)
            .to_data()
            .ptr_eq(&one.batches[0].column(0).to_data()),
        "the first snapshot's batch is handed back as it was, so its file is reused"
    );
    let keys = delta
        .column_by_name("k")
        .unwrap()
        .as_primitive::<Int64Type>();
    assert_eq!(
        keys.values().to_vec(),
        [3, 3],
        "partition 3's two ranks only"
    );
    let three = op.snapshot(Epoch(3)).unwrap();
    assert_eq!(three.batches.len(), 2, "nothing changed: nothing added");
}
