use super::super::UpdatingAggregateFactory;
use crate::aggregate::{AggregateFunction, AggregateSpec};
use riffle_core::arrow::array::{Array, Int64Array, StringArray, TimestampNanosecondArray};
use riffle_core::arrow::datatypes::{DataType, Field};
use riffle_core::arrow::util::pretty::pretty_format_batches;
use riffle_core::{
    hand_over, is_handed, Epoch, Operator, OperatorContext, OperatorFactory, OperatorState,
    RecordBatch, StateMemory, StreamSchema,
};
use std::sync::Arc;

fn input() -> StreamSchema {
    StreamSchema::with_timestamp(vec![
        Field::new("k", DataType::Utf8, false),
        Field::new("v", DataType::Int64, false),
    ])
}

/// Rows `(k, v)` of batch `step`: keys come and go, most return after a while.
fn batch(step: i64) -> RecordBatch {
    let rows: Vec<(String, i64)> = (0..17)
        .map(|i| {
            (
                format!("key-{}", (step * 13 + i * 7) % 400),
                (step * i) % 11,
            )
        })
        .collect();
    RecordBatch::try_new(
        input().schema.clone(),
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(TimestampNanosecondArray::from(vec![step; rows.len()]).with_timezone("UTC")),
        ],
    )
    .unwrap()
}

/// `count(*), sum(v), count(DISTINCT v), max(k) GROUP BY k` as a changelog, with
/// `budget` bytes of state memory spilling under `dir`.
fn aggregate(budget: Option<(u64, &std::path::Path)>) -> Box<dyn Operator> {
    aggregate_counted(budget, &OperatorContext::detached("agg", 0, 1))
}

fn aggregate_counted(
    budget: Option<(u64, &std::path::Path)>,
    ctx: &OperatorContext,
) -> Box<dyn Operator> {
    let specs = vec![
        AggregateSpec::count_star("n"),
        AggregateSpec::new(AggregateFunction::Sum, "v", "total"),
        AggregateSpec::new(AggregateFunction::CountDistinct, "v", "values"),
        AggregateSpec::new(AggregateFunction::Max, "k", "top"),
    ];
    changelog_of(specs, budget, ctx)
}

/// The aggregate of `specs` GROUP BY k as a changelog, with `budget` bytes of state
/// memory spilling under its directory.
fn changelog_of(
    specs: Vec<AggregateSpec>,
    budget: Option<(u64, &std::path::Path)>,
    ctx: &OperatorContext,
) -> Box<dyn Operator> {
    let mut ctx = ctx.clone();
    ctx.state_memory = budget.map(|(bytes, dir)| StateMemory {
        bytes,
        spill_dir: dir.to_path_buf(),
    });
    UpdatingAggregateFactory::new(&input(), &["k"], specs)
        .unwrap()
        .changelog()
        .create(&ctx)
        .unwrap()
}

fn text(out: &[RecordBatch]) -> String {
    pretty_format_batches(out).unwrap().to_string()
}

/// Feeds batches `steps` to `op`, a snapshot after every `every`; the output and
/// the last snapshot, as the checkpoint's writer reads it ([`Writer`]).
fn feed(
    op: &mut dyn Operator,
    steps: std::ops::Range<i64>,
    every: i64,
) -> (Vec<RecordBatch>, riffle_core::OperatorState) {
    let mut out = Vec::new();
    let mut state = Default::default();
    let mut writer = Writer::default();
    for step in steps {
        op.on_batch(0, batch(step), &mut out).unwrap();
        if step % every == every - 1 {
            state = writer.resolve(op.snapshot(Epoch(step as u64)).unwrap());
        }
    }
    (out, state)
}

fn spilled_tiers(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

#[test]
fn groups_beyond_the_budget_are_spilled_and_taken_back_without_changing_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let mut reference = aggregate(None);
    let ctx = OperatorContext::detached("agg", 0, 1);
    let mut spilling = aggregate_counted(Some((2048, dir.path())), &ctx);
    // 90 batches, a snapshot every 2: the delta chain restarts (at 32 batches)
    // with most groups in the tier.
    let (want, _) = feed(reference.as_mut(), 0..90, 2);
    let (got, _) = feed(spilling.as_mut(), 0..90, 2);
    assert_eq!(spilled_tiers(dir.path()), 1, "the budget made it spill");
    assert_eq!(text(&got), text(&want));
    let bytes = ctx.counters.state_bytes();
    assert!(bytes.in_memory > 0 && bytes.in_memory < 4096, "{bytes:?}");
    assert!(bytes.spilled > 0, "{bytes:?}");
    drop(spilling);
    assert_eq!(
        spilled_tiers(dir.path()),
        0,
        "the tier goes with its subtask"
    );
}

#[test]
fn a_checkpoint_taken_with_groups_spilled_restores_every_group() {
    let dir = tempfile::tempdir().unwrap();
    let mut reference = aggregate(None);
    let (_, want_state) = feed(reference.as_mut(), 0..70, 2);
    let mut spilling = aggregate(Some((2048, dir.path())));
    let (_, state) = feed(spilling.as_mut(), 0..70, 2);
    assert!(spilled_tiers(dir.path()) > 0);
    // The checkpoint, restored without a budget and with one, goes on as the
    // reference's does.
    let (want, _) = {
        let mut op = aggregate(None);
        op.restore(want_state).unwrap();
        feed(op.as_mut(), 70..120, 3)
    };
    for budget in [None, Some((1024, dir.path()))] {
        let mut op = aggregate(budget);
        op.restore(state.clone()).unwrap();
        let (got, _) = feed(op.as_mut(), 70..120, 3);
        assert_eq!(text(&got), text(&want), "budget {budget:?}");
    }
}

#[test]
fn a_new_chain_streams_the_spilled_groups_as_they_were_at_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let mut op = aggregate(Some((2048, dir.path())));
    let mut reference = aggregate(None);
    // No snapshot yet: the first starts a chain, with most of the 400 groups spilled.
    feed(op.as_mut(), 0..70, 1000);
    feed(reference.as_mut(), 0..70, 1000);
    let want_state = reference.snapshot(Epoch(1)).unwrap();
    let raw = op.snapshot(Epoch(1)).unwrap();
    assert_eq!(raw.streamed.len(), 1, "the tier's groups, streamed");
    let placeholder = raw.streamed[0].placeholder();
    assert!(raw.batches.iter().any(|b| raw.streamed[0].stands_for(b)));
    assert!(is_handed(placeholder), "it holds no rows of its own");
    let held: usize = (raw.batches.iter())
        .filter(|b| raw.streamed_for(b).is_none())
        .map(RecordBatch::num_rows)
        .sum();
    assert!(held < 100, "{held} groups held in memory, the rest spilled");
    // The subtask goes on, moving groups in and out of the tier, before the writer
    // reads the part: it reads the groups as they were at the snapshot.
    feed(op.as_mut(), 70..90, 1000);
    let mut writer = Writer::default();
    let state = writer.resolve(raw);
    assert_eq!(writer.streamed, 1);
    let go_on = |state: OperatorState| {
        let mut op = aggregate(None);
        op.restore(state).unwrap();
        text(&feed(op.as_mut(), 70..120, 3).0)
    };
    assert!(
        go_on(state) == go_on(want_state),
        "restored as the reference's"
    );
}

#[test]
fn a_chain_started_with_every_group_spilled_still_notes_what_sets_gain() {
    let dir = tempfile::tempdir().unwrap();
    let mut reference = aggregate(None);
    let (_, state) = feed(reference.as_mut(), 0..40, 4);
    // A budget of one byte: the restore spills every group, so the next snapshot
    // starts its chain from the tier alone.
    let mut op = aggregate(Some((1, dir.path())));
    op.restore(state.clone()).unwrap();
    op.snapshot(Epoch(100)).unwrap();
    let (_, after) = feed(op.as_mut(), 40..44, 4);
    let (want, _) = {
        let mut op = aggregate(None);
        op.restore(state).unwrap();
        feed(op.as_mut(), 40..44, 4);
        feed(op.as_mut(), 44..70, 5)
    };
    let mut restored = aggregate(None);
    restored.restore(after).unwrap();
    let (got, _) = feed(restored.as_mut(), 44..70, 5);
    assert_eq!(text(&got), text(&want));
}

/// What the checkpoint writer makes of snapshots: a streamed part is read from its
/// source; a handed-over batch is what was first seen with the same first column (the
/// file, or a streamed part's files, that holds it).
#[derive(Default)]
struct Writer {
    whole: std::collections::HashMap<(usize, usize, usize), Vec<RecordBatch>>,
    /// Streamed parts read.
    streamed: usize,
}

impl Writer {
    fn resolve(&mut self, state: riffle_core::OperatorState) -> riffle_core::OperatorState {
        let mut batches = Vec::new();
        for b in &state.batches {
            let id = riffle_core::batch_identity(b).unwrap();
            if let Some(streamed) = state.streamed_for(b) {
                let rows: Vec<RecordBatch> = streamed
                    .take_source()
                    .unwrap()
                    .collect::<riffle_core::Result<_>>()
                    .unwrap();
                self.streamed += 1;
                batches.extend(rows.iter().cloned());
                self.whole.insert(id, rows);
            } else if riffle_core::is_handed(b) {
                batches.extend(self.whole[&id].iter().cloned());
            } else {
                self.whole.insert(id, vec![b.clone()]);
                batches.push(b.clone());
            }
        }
        riffle_core::OperatorState::of(batches)
    }
}

#[test]
fn rolling_restarts_keep_every_group_in_each_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = OperatorContext::detached("agg", 0, 1);
    let mut op = aggregate_counted(Some((2048, dir.path())), &ctx);
    let mut reference = aggregate(None);
    let mut writer = Writer::default();
    let (mut got, mut want) = (Vec::new(), Vec::new());
    let mut longest = 0;
    for step in 0..150 {
        op.on_batch(0, batch(step), &mut got).unwrap();
        reference.on_batch(0, batch(step), &mut want).unwrap();
        let epoch = Epoch(step as u64 + 1);
        let raw = op.snapshot(epoch).unwrap();
        longest = longest.max(raw.batches.len());
        let state = writer.resolve(raw);
        // Every epoch commits.
        ctx.committed.heard(epoch);
        if step % 23 == 22 {
            // The checkpoint, restored, goes on as the uninterrupted reference does.
            let mut restored = aggregate(None);
            restored.restore(state).unwrap();
            let mut again = aggregate(None);
            again.restore(reference.snapshot(epoch).unwrap()).unwrap();
            let (after, _) = feed(restored.as_mut(), 150..170, 100);
            let (expected, _) = feed(again.as_mut(), 150..170, 100);
            assert_eq!(text(&after), text(&expected), "checkpoint of step {step}");
        }
    }
    assert_eq!(text(&got), text(&want));
    assert!(
        longest > crate::delta_log::MAX_CHAIN + 1,
        "a restart kept the old chain while rolling: {longest}"
    );
}

#[test]
fn groups_that_leave_between_snapshots_reach_the_next_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = OperatorContext::detached("agg", 0, 1);
    let mut op = aggregate_counted(Some((2048, dir.path())), &ctx);
    let mut reference = aggregate(None);
    let mut writer = Writer::default();
    let (mut got, mut want) = (Vec::new(), Vec::new());
    let mut checked = 0;
    // Memory is measured every 64 rows (4 batches), a snapshot taken every 9
    // batches: groups new or changed since the last one leave in between, sets
    // that gained values among them and among those kept.
    for step in 0..240 {
        op.on_batch(0, batch(step), &mut got).unwrap();
        reference.on_batch(0, batch(step), &mut want).unwrap();
        if step % 9 != 8 {
            continue;
        }
        let epoch = Epoch(step as u64 + 1);
        let state = writer.resolve(op.snapshot(epoch).unwrap());
        ctx.committed.heard(epoch);
        let reference_state = reference.snapshot(epoch).unwrap();
        if step % 3 == 2 {
            // The checkpoint, restored, goes on as the uninterrupted reference does.
            let mut restored = aggregate(None);
            restored.restore(state).unwrap();
            let mut again = aggregate(None);
            again.restore(reference_state).unwrap();
            let (after, _) = feed(restored.as_mut(), 240..260, 100);
            let (expected, _) = feed(again.as_mut(), 240..260, 100);
            assert_eq!(text(&after), text(&expected), "checkpoint of step {step}");
            checked += 1;
        }
    }
    assert_eq!(text(&got), text(&want));
    assert!(checked > 5);
    assert!(ctx.counters.state_bytes().spilled > 0);
}

#[test]
fn without_checkpoints_groups_are_spilled_as_they_cool() {
    let dir = tempfile::tempdir().unwrap();
    let mut reference = aggregate(None);
    // No snapshot ever: batches of 17 rows, memory measured every 8192.
    let ctx = OperatorContext::detached("agg", 0, 1);
    let mut spilling = aggregate_counted(Some((1024, dir.path())), &ctx);
    let (want, _) = feed(reference.as_mut(), 0..1200, i64::MAX);
    let (got, _) = feed(spilling.as_mut(), 0..1200, i64::MAX);
    assert_eq!(spilled_tiers(dir.path()), 1);
    assert_eq!(text(&got), text(&want));
    assert!(
        ctx.counters.state_bytes().spilled > 0,
        "reported without snapshots"
    );
}

/// Restores `state` one batch at a time, as the runtime does, and goes on from its
/// chain as if `state` were the checkpoint of `restored`.
fn restore_and_continue(op: &mut dyn Operator, state: &OperatorState, restored: Epoch) {
    for batch in &state.batches {
        let part = OperatorState::of(vec![batch.clone()]);
        op.restore(part).unwrap();
    }
    let chain = state.batches.iter().map(hand_over).collect();
    assert!(op.continue_chain(chain, restored, 1));
}

#[test]
fn a_restored_chain_goes_on_and_the_next_snapshot_holds_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let (_, restored) = feed(aggregate(None).as_mut(), 0..30, 30);
    assert_eq!(restored.batches.len(), 1, "the first snapshot: every group");
    let (want, _) = {
        let mut op = aggregate(None);
        op.restore(restored.clone()).unwrap();
        feed(op.as_mut(), 30..33, 1000);
        feed(op.as_mut(), 33..80, 7)
    };
    for budget in [None, Some((1024, dir.path()))] {
        let mut op = aggregate(budget);
        restore_and_continue(op.as_mut(), &restored, Epoch(29));
        feed(op.as_mut(), 30..33, 1000);
        let next = op.snapshot(Epoch(30)).unwrap();
        // The restored file is referenced as it is; what follows holds only the
        // groups the 51 rows since touched.
        let first = &next.batches[0];
        assert!(is_handed(first), "budget {budget:?}");
        let fresh = &next.batches[1..];
        assert!(fresh.iter().all(|b| !is_handed(b)));
        let rows: usize = fresh.iter().map(RecordBatch::num_rows).sum();
        assert!(rows > 0 && rows <= 51, "{rows} rows, budget {budget:?}");
        assert!(rows < restored.batches[0].num_rows() / 2);
        // Restored from the file and the delta, it goes on as the reference does:
        // count DISTINCT included, whose delta holds what each set gained.
        let mut checkpoint = restored.batches.clone();
        checkpoint.extend(fresh.iter().cloned());
        let mut again = aggregate(None);
        again.restore(OperatorState::of(checkpoint)).unwrap();
        let (got, _) = feed(again.as_mut(), 33..80, 7);
        assert_eq!(text(&got), text(&want), "budget {budget:?}");
    }
}

#[test]
fn a_restored_chain_starts_anew_unless_the_restored_epoch_is_the_one_before() {
    let (_, restored) = feed(aggregate(None).as_mut(), 0..30, 30);
    let mut op = aggregate(None);
    restore_and_continue(op.as_mut(), &restored, Epoch(29));
    feed(op.as_mut(), 30..33, 1000);
    // Epoch 30 failed: the writer may not reference epoch 29's files at 31.
    let next = op.snapshot(Epoch(31)).unwrap();
    assert!(next.batches.iter().all(|b| !is_handed(b)));
    let rows: usize = next.batches.iter().map(RecordBatch::num_rows).sum();
    assert!(rows >= restored.batches[0].num_rows(), "every group, whole");
}

/// `count(*), sum(v), max(k) GROUP BY k`: a group's later state rows replace its
/// earlier ones (no count DISTINCT), so a restore beyond the budget goes into the tier.
fn replacing(budget: Option<(u64, &std::path::Path)>, ctx: &OperatorContext) -> Box<dyn Operator> {
    let specs = vec![
        AggregateSpec::count_star("n"),
        AggregateSpec::new(AggregateFunction::Sum, "v", "total"),
        AggregateSpec::new(AggregateFunction::Max, "k", "top"),
    ];
    changelog_of(specs, budget, ctx)
}

/// Batch `step`, its first row's key replaced by one too long for the tier when `long`.
fn batch_maybe_long(step: i64, long: bool) -> RecordBatch {
    let b = batch(step);
    if !long {
        return b;
    }
    let keys = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
    let long_key = "L".repeat(super::MAX_KEY_BYTES + 10);
    let keys = StringArray::from_iter_values((0..keys.len()).map(|i| {
        if i == 0 {
            long_key.as_str()
        } else {
            keys.value(i)
        }
    }));
    let mut columns = b.columns().to_vec();
    columns[0] = Arc::new(keys);
    RecordBatch::try_new(b.schema(), columns).unwrap()
}

/// Feeds batches `steps`, a snapshot after every `every`: the output and the last
/// snapshot.
fn feed_maybe_long(
    op: &mut dyn Operator,
    steps: std::ops::Range<i64>,
    every: i64,
    long: bool,
) -> (Vec<RecordBatch>, OperatorState) {
    let mut out = Vec::new();
    let mut state = Default::default();
    let mut writer = Writer::default();
    for step in steps {
        op.on_batch(0, batch_maybe_long(step, long), &mut out)
            .unwrap();
        if step % every == every - 1 {
            state = writer.resolve(op.snapshot(Epoch(step as u64)).unwrap());
        }
    }
    (out, state)
}

#[test]
fn a_restore_beyond_the_budget_goes_into_the_tier_and_loses_nothing() {
    let ctx = OperatorContext::detached("agg", 0, 1);
    // A tiny budget writes each batch as a run; a larger one gathers several, in
    // which a key's later row must win.
    for (long, budget) in [(false, 1024), (true, 1024), (false, 16 << 10)] {
        let dir = tempfile::tempdir().unwrap();
        // A chain: the first snapshot, then deltas whose rows replace earlier ones.
        let (_, state) = feed_maybe_long(replacing(None, &ctx).as_mut(), 0..40, 2, long);
        assert!(state.batches.len() > 5, "a chain of deltas");
        let reference = || {
            let mut op = replacing(None, &ctx);
            op.restore(state.clone()).unwrap();
            op
        };
        let mut want_op = reference();
        let (want, want_next) = feed_maybe_long(want_op.as_mut(), 40..120, 3, long);
        let counted = OperatorContext::detached("agg", 0, 1);
        let mut op = replacing(Some((budget, dir.path())), &counted);
        // In parts, as the runtime restores.
        for batch in &state.batches {
            let part = OperatorState::of(vec![batch.clone()]);
            op.restore(part).unwrap();
        }
        let bytes = counted.counters.state_bytes();
        assert!(bytes.spilled > 0, "long {long}: {bytes:?}");
        if !long {
            assert!(bytes.in_memory < 512, "budget {budget}: {bytes:?}");
        }
        let (got, next) = feed_maybe_long(op.as_mut(), 40..120, 3, long);
        assert_eq!(text(&got), text(&want), "long {long}, budget {budget}");
        // Its next chain, which holds the tier's groups, restores as the reference's.
        let go_on = |state: OperatorState| {
            let mut op = replacing(None, &ctx);
            op.restore(state).unwrap();
            feed_maybe_long(op.as_mut(), 120..150, 4, long).0
        };
        assert_eq!(
            text(&go_on(next)),
            text(&go_on(want_next)),
            "long {long}, budget {budget}"
        );
    }
}

#[test]
fn a_chain_restored_into_the_tier_goes_on_and_the_next_snapshot_holds_only_what_changed() {
    let ctx = OperatorContext::detached("agg", 0, 1);
    let dir = tempfile::tempdir().unwrap();
    // A chain of ten batches: the first snapshot, then deltas.
    let (_, restored) = feed_maybe_long(replacing(None, &ctx).as_mut(), 0..30, 3, false);
    assert_eq!(restored.batches.len(), 10);
    let (want, _) = {
        let mut op = replacing(None, &ctx);
        op.restore(restored.clone()).unwrap();
        feed_maybe_long(op.as_mut(), 30..33, 1000, false);
        feed_maybe_long(op.as_mut(), 33..80, 7, false)
    };
    let mut op = replacing(Some((1024, dir.path())), &ctx);
    restore_and_continue(op.as_mut(), &restored, Epoch(29));
    feed_maybe_long(op.as_mut(), 30..33, 1000, false);
    let next = op.snapshot(Epoch(30)).unwrap();
    // The restored files are referenced as they are; what follows holds only the
    // groups the 51 rows since touched, read back from the tier.
    let handed = next.batches.iter().take_while(|b| is_handed(b)).count();
    assert_eq!(handed, restored.batches.len());
    let fresh = &next.batches[handed..];
    assert!(fresh.iter().all(|b| !is_handed(b)));
    let rows: usize = fresh.iter().map(RecordBatch::num_rows).sum();
    assert!(rows > 0 && rows <= 51, "{rows} rows");
    // Restored from the files and the delta, it goes on as the reference does.
    let mut checkpoint = restored.batches.clone();
    checkpoint.extend(fresh.iter().cloned());
    let mut again = replacing(None, &ctx);
    again.restore(OperatorState::of(checkpoint)).unwrap();
    let (got, _) = feed_maybe_long(again.as_mut(), 33..80, 7, false);
    assert_eq!(text(&got), text(&want));
}
