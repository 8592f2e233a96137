//! Operators with stable state (`OperatorFactory::stable_state`) hand every batch of an
//! earlier snapshot back unchanged (the same arrays) while its part of the state did not
//! change, and add only the new or changed part: the checkpoint then reuses the earlier
//! files instead of rewriting the state. Restoring such chains is checked in
//! `snapshot_restore.rs`.

use crate::common;

use common::{lines, rows, schema, to_batch};
use riffle_core::{Epoch, OperatorContext, OperatorFactory, OperatorState, RecordBatch};
use riffle_operators::{
    AggregateFunction, AggregateSpec, StreamJoinFactory, UpdatingAggregateFactory,
};
use std::time::Duration;

fn same(a: &RecordBatch, b: &RecordBatch) -> bool {
    a.num_rows() == b.num_rows() && a.column(0).to_data().ptr_eq(&b.column(0).to_data())
}

/// Feeds `before`, snapshots, feeds `after`, snapshots again; returns both snapshots.
fn two_snapshots(
    factory: &dyn OperatorFactory,
    before: &[(usize, RecordBatch)],
    after: &[(usize, RecordBatch)],
) -> (OperatorState, OperatorState) {
    assert!(factory.stable_state(), "{}", factory.describe());
    let mut op = factory
        .create(&OperatorContext::detached("op", 0, 1))
        .unwrap();
    let mut out = Vec::new();
    for (input, batch) in before {
        op.on_batch(*input, batch.clone(), &mut out).unwrap();
    }
    let first = op.snapshot(Epoch(1)).unwrap();
    for (input, batch) in after {
        op.on_batch(*input, batch.clone(), &mut out).unwrap();
    }
    let second = op.snapshot(Epoch(2)).unwrap();
    (first, second)
}

/// Rows of `second` in batches `first` did not hand out.
fn added_rows(first: &OperatorState, second: &OperatorState) -> usize {
    for b in &first.batches {
        assert!(
            second.batches.iter().any(|s| same(s, b)),
            "a batch of the first snapshot is missing from the second, or was rebuilt"
        );
    }
    second
        .batches
        .iter()
        .filter(|s| !first.batches.iter().any(|b| same(s, b)))
        .map(|b| b.num_rows())
        .sum()
}

#[test]
fn an_updating_aggregate_adds_only_the_groups_that_changed() {
    let s = schema();
    let specs = vec![
        AggregateSpec::count_star("n"),
        AggregateSpec::new(AggregateFunction::CountDistinct, "s", "distinct_s"),
    ];
    let agg = UpdatingAggregateFactory::new(&s, &["k"], specs).unwrap();
    // 1000 keys, then 50 rows touching at most 50 of them.
    let before = vec![(0, to_batch(&s, &rows(1, 4000, 1000, 0)))];
    let after = vec![(0, to_batch(&s, &rows(2, 50, 1000, 0)))];
    let (first, second) = two_snapshots(&agg, &before, &after);
    assert!(first.rows() > 900, "the first snapshot is whole");
    let added = added_rows(&first, &second);
    assert!(
        (1..=50).contains(&added),
        "{added} rows added for 50 inputs"
    );
}

#[test]
fn a_stream_join_adds_only_the_rows_that_arrived() {
    let s = schema();
    let unbounded = StreamJoinFactory::new(&s, &s, &["k"], &["k"], &["k", "v"], &["s"]).unwrap();
    let interval = StreamJoinFactory::new(&s, &s, &["k"], &["k"], &["k", "v"], &["s"])
        .unwrap()
        .with_retention(None, Some(Duration::from_secs(3600)));
    for join in [unbounded, interval] {
        let before = vec![
            (0, to_batch(&s, &rows(1, 500, 50, 0))),
            (1, to_batch(&s, &rows(2, 500, 50, 0))),
        ];
        let after = vec![
            (0, to_batch(&s, &rows(3, 7, 50, 0))),
            (1, to_batch(&s, &rows(4, 5, 50, 0))),
        ];
        let (first, second) = two_snapshots(&join, &before, &after);
        assert_eq!(first.rows(), 1000);
        assert_eq!(added_rows(&first, &second), 12, "{}", join.describe());
    }
}

/// The rows of a state as lines, the key-group column included.
fn state_lines(state: &OperatorState) -> Vec<String> {
    lines(&state.batches)
}

#[test]
fn an_interval_join_snapshotted_every_batch_holds_what_one_whole_snapshot_holds() {
    // Right rows leave the state as the watermark passes them (compaction), left rows
    // stay: the chain must drop what compaction dropped and keep the rest.
    let s = schema();
    let interval = StreamJoinFactory::new(&s, &s, &["k"], &["k"], &["k", "v"], &["s"])
        .unwrap()
        .with_retention(None, Some(Duration::from_millis(300)));
    let ctx = OperatorContext::detached("op", 0, 1);
    let (mut chained, mut whole) = (
        interval.create(&ctx).unwrap(),
        interval.create(&ctx).unwrap(),
    );
    let (left, right) = (rows(1, 600, 20, 0), rows(2, 600, 20, 0));
    let mut out = Vec::new();
    let mut last = None;
    for (i, (l, r)) in left.chunks(20).zip(right.chunks(20)).enumerate() {
        let watermark = l.last().unwrap().ts - 100_000_000;
        for op in [&mut chained, &mut whole] {
            op.on_batch(0, to_batch(&s, l), &mut out).unwrap();
            op.on_batch(1, to_batch(&s, r), &mut out).unwrap();
            op.on_watermark(watermark, &mut out).unwrap();
        }
        last = Some(chained.snapshot(Epoch(i as u64 + 1)).unwrap());
    }
    let chain = last.unwrap();
    let full = whole.snapshot(Epoch(1)).unwrap();
    assert!(full.rows() < 1200, "compaction dropped right rows");
    assert_eq!(state_lines(&chain), state_lines(&full));
}
