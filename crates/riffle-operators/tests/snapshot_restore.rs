//! Every stateful operator's state survives snapshot → restore: a run restored from a
//! snapshot at any cut point emits exactly what an uninterrupted run emits.

use crate::common;

use common::{drive, drive_checkpointed, lines, rows, schema, to_batch};
use riffle_core::arrow::datatypes::{DataType, Field};
use riffle_core::{OperatorFactory, RecordBatch, StreamSchema};
use riffle_operators::interval_max_join::IntervalMaxJoinFactory;
use riffle_operators::{
    AggregateFunction, AggregateSpec, Extreme, JoinKind, StreamJoinFactory,
    UpdatingAggregateFactory, WindowJoinFactory, WindowMaxRowsFactory,
};
use std::time::Duration;

const DELAY_NS: i64 = 200 * 1_000_000;

fn two_inputs(seed: u64, batch: usize) -> Vec<(usize, RecordBatch)> {
    let s = schema();
    let left = rows(seed, 300, 11, 100);
    let right = rows(seed + 100, 300, 11, 100);
    let mut out = Vec::new();
    for (l, r) in left.chunks(batch).zip(right.chunks(batch)) {
        out.push((0, to_batch(&s, l)));
        out.push((1, to_batch(&s, r)));
    }
    out
}

fn check(factory: &dyn OperatorFactory, inputs: &[(usize, RecordBatch)]) {
    let straight = lines(&drive(factory, inputs, DELAY_NS, None));
    assert!(
        !straight.is_empty(),
        "{}: no output, the check would prove nothing",
        factory.describe()
    );
    for cut in [0, 3, inputs.len() / 2, inputs.len() - 2] {
        let restored = lines(&drive(factory, inputs, DELAY_NS, Some(cut)));
        assert_eq!(
            restored,
            straight,
            "{} restored after input {cut}",
            factory.describe()
        );
        // Snapshots after every input: each incremental on the one before.
        let restored = lines(&drive_checkpointed(factory, inputs, DELAY_NS, cut));
        assert_eq!(
            restored,
            straight,
            "{} restored from a chain of snapshots after input {cut}",
            factory.describe()
        );
    }
}

#[test]
fn window_join_restores() {
    let s = schema();
    let inner = WindowJoinFactory::new(
        JoinKind::Inner,
        &s,
        &s,
        &["k"],
        &["k"],
        Duration::from_millis(500),
        &["k", "v"],
        &["s"],
    )
    .unwrap();
    check(&inner, &two_inputs(1, 20));
    let semi = WindowJoinFactory::new(
        JoinKind::LeftSemi,
        &s,
        &s,
        &["k"],
        &["k"],
        Duration::from_millis(500),
        &["k", "s"],
        &[],
    )
    .unwrap();
    check(&semi, &two_inputs(2, 20));
}

#[test]
fn stream_join_restores() {
    let s = schema();
    let join = StreamJoinFactory::new(&s, &s, &["k"], &["k"], &["k", "v"], &["s"]).unwrap();
    check(&join, &two_inputs(3, 25));
}

#[test]
fn window_max_rows_restores() {
    let s = schema();
    let input: Vec<(usize, RecordBatch)> = rows(4, 400, 5, 100)
        .chunks(30)
        .map(|c| (0, to_batch(&s, c)))
        .collect();
    let max_rows = WindowMaxRowsFactory::new(&s, "k", Duration::from_millis(500), false).unwrap();
    check(&max_rows, &input);
    // By time: rows wait at the local stage; at the global one they also wait at a
    // window's end, and closed windows keep their extreme. Rows fall every 10 ms with up
    // to 100 ms of disorder, so many sit exactly on a window's end.
    for global in [false, true] {
        let by_time = WindowMaxRowsFactory::new(&s, "k", Duration::from_millis(500), global)
            .unwrap()
            .extreme(Extreme::Min)
            .by_time(true, ["window_start", "window_end", "low"])
            .unwrap();
        check(&by_time, &input);
    }
}

#[test]
fn updating_aggregate_restores() {
    let s = schema();
    let input: Vec<(usize, RecordBatch)> = rows(5, 400, 9, 0)
        .chunks(30)
        .map(|c| (0, to_batch(&s, c)))
        .collect();
    let specs = vec![
        AggregateSpec::count_star("n"),
        AggregateSpec::new(AggregateFunction::Sum, "v", "sum"),
        AggregateSpec::new(AggregateFunction::CountDistinct, "s", "distinct_s"),
        AggregateSpec::new(AggregateFunction::CountDistinct, "v", "distinct_v"),
    ];
    let agg = UpdatingAggregateFactory::new(&s, &["k"], specs.clone()).unwrap();
    check(&agg, &input);
    // Many keys: each snapshot in the chain holds only some of them.
    let input: Vec<(usize, RecordBatch)> = rows(7, 400, 200, 0)
        .chunks(30)
        .map(|c| (0, to_batch(&s, c)))
        .collect();
    let agg = UpdatingAggregateFactory::new(&s, &["k"], specs.clone()).unwrap();
    check(&agg, &input);
    // As a changelog, the withdrawn rows after a restore are the restored values.
    let agg = UpdatingAggregateFactory::new(&s, &["k"], specs)
        .unwrap()
        .changelog();
    check(&agg, &input);
}

#[test]
fn interval_max_join_restores() {
    // Left rows open an interval [_timestamp, until] per key; right rows carry values.
    let s = schema();
    let left_schema = StreamSchema::with_timestamp(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("from", riffle_core::timestamp_type(), false),
        Field::new("until", riffle_core::timestamp_type(), false),
    ]);
    let right = rows(6, 400, 7, 0);
    let mut inputs = Vec::new();
    for (i, chunk) in right.chunks(20).enumerate() {
        // Every other batch, open one interval per key covering the next 300 ms.
        if i % 2 == 0 {
            let t0 = chunk[0].ts;
            let ks: Vec<i64> = (0..7).collect();
            let from = vec![t0; 7];
            let until = vec![t0 + 300_000_000; 7];
            let batch = RecordBatch::try_new(
                left_schema.schema.clone(),
                vec![
                    std::sync::Arc::new(riffle_core::arrow::array::Int64Array::from(ks)),
                    std::sync::Arc::new(
                        riffle_core::arrow::array::TimestampNanosecondArray::from(from.clone())
                            .with_timezone("UTC"),
                    ),
                    std::sync::Arc::new(
                        riffle_core::arrow::array::TimestampNanosecondArray::from(until)
                            .with_timezone("UTC"),
                    ),
                    std::sync::Arc::new(
                        riffle_core::arrow::array::TimestampNanosecondArray::from(from)
                            .with_timezone("UTC"),
                    ),
                ],
            )
            .unwrap();
            inputs.push((0, batch));
        }
        inputs.push((1, to_batch(&s, chunk)));
    }
    let join = IntervalMaxJoinFactory::new(
        &left_schema,
        &s,
        "k",
        "k",
        ("from", "until"),
        "k",
        "best",
        &["k", "from"],
    )
    .unwrap();
    check(&join, &inputs);
}

#[test]
fn window_aggregate_snapshots_hold_only_changed_keys_after_the_first() {
    use riffle_core::{Epoch, OperatorContext};
    use riffle_operators::{WindowAggregateFactory, WindowSpec};
    let s = schema();
    let factory = WindowAggregateFactory::new(
        &s,
        &["k"],
        WindowSpec::tumbling(Duration::from_millis(100)),
        vec![AggregateSpec::count_star("n")],
    )
    .unwrap();
    assert!(factory.stable_state());
    let mut op = factory
        .create(&OperatorContext::detached("w", 0, 1))
        .unwrap();
    let all = rows(7, 40, 5, 0); // 10 ms apart: windows [0, 100), [100, 200), …
    let mut out = Vec::new();
    op.on_batch(0, to_batch(&s, &all[..20]), &mut out).unwrap();
    let first = op.snapshot(Epoch(1)).unwrap().batches;
    let again = op.snapshot(Epoch(2)).unwrap().batches;
    assert_eq!(first.len(), 2, "one batch per window");
    let same = |a: &RecordBatch, b: &RecordBatch| {
        a.column(0).to_data().buffers()[0].as_ptr() == b.column(0).to_data().buffers()[0].as_ptr()
    };
    assert_eq!(again.len(), 2, "nothing changed, nothing added");
    assert!(first.iter().zip(&again).all(|(a, b)| same(a, b)));
    assert_ne!(
        first[0].schema(),
        first[1].schema(),
        "windows must differ in schema metadata so they go to separate files"
    );
    // One more row for a key the second window already holds: that window gains a
    // one-row delta; every earlier batch is handed over unchanged (its file is reused).
    op.on_batch(0, to_batch(&s, &all[15..16]), &mut out)
        .unwrap();
    let third = op.snapshot(Epoch(3)).unwrap().batches;
    assert_eq!(third.len(), 3);
    assert!(same(&first[0], &third[0]) && same(&first[1], &third[1]));
    assert_eq!(third[2].num_rows(), 1);
    assert_eq!(third[2].schema(), first[1].schema());
}

#[test]
fn semi_join_keeps_distinct_right_keys_and_null_keys_never_match() {
    use riffle_core::{Epoch, OperatorContext};
    let s = schema();
    // Join on `v`, which is sometimes null on both sides.
    let semi = WindowJoinFactory::new(
        JoinKind::LeftSemi,
        &s,
        &s,
        &["v"],
        &["v"],
        Duration::from_millis(500),
        &["k", "v"],
        &[],
    )
    .unwrap();
    let inputs = two_inputs(5, 20);
    let out = lines(&drive(&semi, &inputs, DELAY_NS, None));
    assert!(!out.is_empty());
    assert!(
        out.iter().all(|l| l.split('|').nth(1) != Some("")),
        "a null key matched: {out:?}"
    );
    // Right rows repeat keys; the state holds each key of a window once.
    let right = rows(9, 200, 3, 0); // 200 rows, keys 0..3, within 2 s
    let by_k = WindowJoinFactory::new(
        JoinKind::LeftSemi,
        &s,
        &s,
        &["k"],
        &["k"],
        Duration::from_secs(10),
        &["k"],
        &[],
    )
    .unwrap();
    let mut op = by_k.create(&OperatorContext::detached("j", 0, 1)).unwrap();
    let mut sink = Vec::new();
    op.on_batch(1, to_batch(&s, &right), &mut sink).unwrap();
    let state = op.snapshot(Epoch(1)).unwrap();
    assert_eq!(state.rows(), 3, "200 right rows over 3 keys in one window");
    check(&by_k, &two_inputs(6, 20));
}

#[test]
fn anti_join_emits_exactly_the_left_rows_the_semi_join_does_not_and_restores() {
    let s = schema();
    let join = |kind| {
        WindowJoinFactory::new(
            kind,
            &s,
            &s,
            &["v"],
            &["v"],
            Duration::from_millis(500),
            &["k", "v"],
            &[],
        )
        .unwrap()
    };
    let (semi, anti) = (join(JoinKind::LeftSemi), join(JoinKind::LeftAnti));
    let inputs = two_inputs(5, 20);
    let matched = lines(&drive(&semi, &inputs, DELAY_NS, None));
    let unmatched = lines(&drive(&anti, &inputs, DELAY_NS, None));
    assert!(!matched.is_empty() && !unmatched.is_empty());
    // A row with a NULL key matches nothing, so NOT EXISTS keeps it.
    assert!(
        unmatched.iter().any(|l| l.split('|').nth(1) == Some("")),
        "{unmatched:?}"
    );
    // Together they are every left row of every window, each once.
    let everything = WindowJoinFactory::new(
        JoinKind::LeftSemi,
        &s,
        &s,
        &["k"],
        &["k"],
        Duration::from_millis(500),
        &["k", "v"],
        &[],
    )
    .unwrap();
    // The left rows joined with themselves on `k` (never NULL): each left row once.
    let left_only: Vec<(usize, RecordBatch)> = inputs
        .iter()
        .filter(|(i, _)| *i == 0)
        .flat_map(|(_, b)| [(0, b.clone()), (1, b.clone())])
        .collect();
    let mut both: Vec<String> = matched.iter().chain(&unmatched).cloned().collect();
    let mut all = lines(&drive(&everything, &left_only, DELAY_NS, None));
    both.sort();
    all.sort();
    assert_eq!(both, all);
    check(&anti, &two_inputs(6, 20));
}
