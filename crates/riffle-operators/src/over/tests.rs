//! Named behaviours of the OVER operators.

use super::*;
use riffle_core::arrow::array::{
    AsArray, Int64Array, RecordBatch, StringArray, TimestampNanosecondArray,
};
use riffle_core::arrow::datatypes::Int64Type;
use riffle_core::OperatorContext;

fn input() -> StreamSchema {
    StreamSchema::with_timestamp(vec![
        Field::new("k", DataType::Utf8, false),
        Field::new("v", DataType::Int64, true),
    ])
}

fn rows(rows: &[(&str, i64, i64)]) -> RecordBatch {
    RecordBatch::try_new(
        input().schema.clone(),
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(
                TimestampNanosecondArray::from_iter_values(rows.iter().map(|r| r.2))
                    .with_timezone("UTC"),
            ),
        ],
    )
    .unwrap()
}

/// `sum(v) AS total`.
fn sum_of_v() -> [OverAggregate; 1] {
    [OverAggregate {
        function: OverFunction::Sum,
        input: Some("v".into()),
        output: "total".into(),
        output_type: DataType::Int64,
    }]
}

/// Rows that are upserts keyed by `k`, ordered by `v` in their partition.
fn upserts_by_k() -> OverInput {
    OverInput::Updating {
        key: vec!["k".into()],
        order: vec![OrderColumn {
            column: "v".into(),
            descending: false,
            nulls_first: true,
        }],
    }
}

fn sum(frame: OverFrame, mode: OverInput) -> Box<dyn Operator> {
    let aggregates = sum_of_v();
    OverAggregateFactory::new(&input(), &["k"], frame, &aggregates, mode)
        .unwrap()
        .create(&OperatorContext::detached("over", 0, 1))
        .unwrap()
}

/// (v, total) of every output row.
fn totals(out: &[RecordBatch]) -> Vec<(i64, i64)> {
    out.iter()
        .flat_map(|b| {
            let v = b.column(1).as_primitive::<Int64Type>().clone();
            let t = b.column(2).as_primitive::<Int64Type>().clone();
            (0..b.num_rows()).map(move |r| (v.value(r), t.value(r)))
        })
        .collect()
}

#[test]
fn a_row_leaves_with_its_frame_once_the_watermark_passes_it() {
    let mut op = sum(OverFrame::Rows(Some(1)), OverInput::EventTime);
    let mut out = Vec::new();
    // Out of order: the frame follows event time, not arrival.
    op.on_batch(
        0,
        rows(&[("a", 20, 2), ("a", 10, 1), ("a", 30, 3)]),
        &mut out,
    )
    .unwrap();
    assert!(out.is_empty());
    op.on_watermark(2, &mut out).unwrap();
    assert_eq!(totals(&out), [(10, 10), (20, 30)]);
    out.clear();
    op.on_watermark(3, &mut out).unwrap();
    assert_eq!(totals(&out), [(30, 50)]);
}

#[test]
fn a_row_at_or_before_the_watermark_is_late_and_dropped() {
    let mut op = sum(OverFrame::Rows(None), OverInput::EventTime);
    let mut out = Vec::new();
    op.on_watermark(5, &mut out).unwrap();
    op.on_batch(0, rows(&[("a", 1, 5), ("a", 2, 6)]), &mut out)
        .unwrap();
    op.on_watermark(6, &mut out).unwrap();
    assert_eq!(totals(&out), [(2, 2)]);
}

#[test]
fn a_range_frame_holds_the_rows_of_the_same_time() {
    let mut op = sum(
        OverFrame::Range(Some(Duration::from_nanos(10))),
        OverInput::EventTime,
    );
    let mut out = Vec::new();
    op.on_batch(
        0,
        rows(&[
            ("a", 1, 100),
            ("a", 2, 105),
            ("a", 4, 105),
            ("a", 8, 116),
            ("b", 5, 105),
        ]),
        &mut out,
    )
    .unwrap();
    op.on_watermark(200, &mut out).unwrap();
    // Both rows at 105 see each other; the row at 116 reaches back to 106.
    assert_eq!(totals(&out), [(1, 1), (2, 7), (4, 7), (5, 5), (8, 8)]);
}

#[test]
fn event_time_state_restores_into_a_fresh_operator_with_the_same_answers() {
    let batch = rows(&[("a", 1, 1), ("a", 2, 2), ("a", 4, 3), ("a", 8, 4)]);
    for frame in [OverFrame::Rows(Some(2)), OverFrame::Range(None)] {
        let mut whole = sum(frame, OverInput::EventTime);
        let mut expected = Vec::new();
        whole.on_batch(0, batch.clone(), &mut expected).unwrap();
        whole.on_watermark(2, &mut expected).unwrap();
        whole.on_watermark(9, &mut expected).unwrap();

        let mut first = sum(frame, OverInput::EventTime);
        let mut out = Vec::new();
        first.on_batch(0, batch.clone(), &mut out).unwrap();
        first.on_watermark(2, &mut out).unwrap();
        let state = first.snapshot(riffle_core::Epoch(1)).unwrap();
        let mut second = sum(frame, OverInput::EventTime);
        second.restore(state).unwrap();
        second.on_watermark(9, &mut out).unwrap();
        assert_eq!(totals(&out), totals(&expected), "{frame:?}");
    }
}

#[test]
fn an_upsert_re_emits_every_row_whose_frame_it_changed() {
    let aggregates = sum_of_v();
    // Partitioned by nothing: one partition of rows keyed by `k`, ordered by `v`.
    let factory = OverAggregateFactory::new(
        &input(),
        &[],
        OverFrame::Rows(Some(1)),
        &aggregates,
        upserts_by_k(),
    )
    .unwrap();
    let mut op = factory
        .create(&OperatorContext::detached("over", 0, 1))
        .unwrap();
    let mut out = Vec::new();
    op.on_batch(
        0,
        rows(&[("x", 10, 1), ("y", 20, 2), ("z", 30, 3)]),
        &mut out,
    )
    .unwrap();
    assert_eq!(totals(&out), [(10, 10), (20, 30), (30, 50)]);
    out.clear();
    // `x` moves from first to last: every row from its old place on changes.
    op.on_batch(0, rows(&[("x", 40, 4)]), &mut out).unwrap();
    assert_eq!(totals(&out), [(20, 20), (30, 50), (40, 70)]);
    // A restored operator holds the current rows, not the replaced one.
    let state = op.snapshot(riffle_core::Epoch(1)).unwrap();
    let mut restored = factory
        .create(&OperatorContext::detached("over", 0, 1))
        .unwrap();
    restored.restore(state).unwrap();
    out.clear();
    restored
        .on_batch(0, rows(&[("w", 5, 5)]), &mut out)
        .unwrap();
    assert_eq!(totals(&out), [(5, 5), (20, 25), (30, 50), (40, 70)]);
}

#[test]
fn updating_state_snapshots_add_only_changed_partitions_and_restore_the_current_rows() {
    let aggregates = sum_of_v();
    let factory = OverAggregateFactory::new(
        &input(),
        &["k"],
        OverFrame::Rows(None),
        &aggregates,
        upserts_by_k(),
    )
    .unwrap();
    assert!(factory.stable_state());
    let ctx = OperatorContext::detached("over", 0, 1);
    let mut op = factory.create(&ctx).unwrap();
    let mut out = Vec::new();
    op.on_batch(0, rows(&[("a", 1, 1), ("b", 2, 2), ("c", 3, 3)]), &mut out)
        .unwrap();
    let first = op.snapshot(riffle_core::Epoch(1)).unwrap();
    op.on_batch(0, rows(&[("b", 7, 4)]), &mut out).unwrap();
    let second = op.snapshot(riffle_core::Epoch(2)).unwrap();
    assert_eq!(second.batches.len(), 2);
    assert!(second.batches[0]
        .column(0)
        .to_data()
        .ptr_eq(&first.batches[0].column(0).to_data()));
    assert_eq!(second.batches[1].num_rows(), 1, "partition `b` only");
    let mut restored = factory.create(&ctx).unwrap();
    restored.restore(second).unwrap();
    let values = |state: &riffle_core::OperatorState| -> Vec<i64> {
        let mut v: Vec<i64> = state
            .batches
            .iter()
            .flat_map(|b| {
                let v = b.column_by_name("v").unwrap().as_primitive::<Int64Type>();
                v.values().to_vec()
            })
            .collect();
        v.sort();
        v
    };
    let whole = restored.snapshot(riffle_core::Epoch(3)).unwrap();
    assert_eq!(
        values(&whole),
        [1, 3, 7],
        "b's row replaced, not kept beside"
    );
}

#[test]
fn a_partition_outside_the_key_of_updating_rows_is_refused() {
    let mode = OverInput::Updating {
        key: vec!["k".into()],
        order: vec![],
    };
    let aggregates = [OverAggregate {
        function: OverFunction::CountStar,
        input: None,
        output: "n".into(),
        output_type: DataType::Int64,
    }];
    let err = OverAggregateFactory::new(&input(), &["v"], OverFrame::Rows(None), &aggregates, mode)
        .err()
        .unwrap();
    assert!(err.to_string().contains("partition column `v`"), "{err}");
}

#[test]
fn rows_of_one_time_are_taken_in_the_order_of_their_values_not_of_arrival() {
    for arrival in [[("a", 5, 7), ("a", 1, 7)], [("a", 1, 7), ("a", 5, 7)]] {
        let mut op = sum(OverFrame::Rows(Some(1)), OverInput::EventTime);
        let mut out = Vec::new();
        op.on_batch(0, rows(&[("a", 100, 6)]), &mut out).unwrap();
        op.on_batch(0, rows(&arrival), &mut out).unwrap();
        op.on_watermark(7, &mut out).unwrap();
        // 1 before 5 either way: 1's frame is (100, 1), 5's is (1, 5).
        let mut got = totals(&out);
        got.sort();
        assert_eq!(got, [(1, 101), (5, 6), (100, 100)], "{arrival:?}");
    }
}
