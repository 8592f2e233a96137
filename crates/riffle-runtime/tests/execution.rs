//! How the runtime executes a graph: failures surface with the operator's name and
//! nothing hangs, barriers are aligned so snapshots are consistent, exchanges deliver as
//! promised, and chaining follows the rules.

use crate::common;

use common::{no_delay, runtime};
use datafusion_expr::{col, lit};
use riffle_connectors::sinks::CollectSinkFactory;
use riffle_connectors::PeerSourceFactory;
use riffle_core::arrow::array::{Int64Array, UInt64Array};
use riffle_core::arrow::datatypes::{DataType, Field, Schema};
use riffle_core::{
    Barrier, BarrierKind, Epoch, Error, Operator, OperatorContext, OperatorFactory, OperatorState,
    RecordBatch, Result, StreamSchema,
};
use riffle_operators::{
    AggregateSpec, FilterFactory, ProjectFactory, WindowAggregateFactory, WindowSpec,
};
use riffle_runtime::job::{self, JobConfig};
use riffle_runtime::{JobGraph, PhysicalPlan, RuntimeError};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Passes rows through; fails (or panics) when it sees a row with `id == trigger`.
struct Tripwire {
    schema: StreamSchema,
    trigger: i64,
    panic: bool,
}

impl OperatorFactory for Tripwire {
    fn describe(&self) -> String {
        "tripwire".into()
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn is_stateful(&self) -> bool {
        false
    }
    fn key_columns(&self, _: usize) -> Option<Vec<usize>> {
        // Keyed, so the tripwire runs in its own tasks behind channels.
        Some(vec![0])
    }
    fn create(&self, _: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(TripwireOp {
            trigger: self.trigger,
            panic: self.panic,
        }))
    }
}

struct TripwireOp {
    trigger: i64,
    panic: bool,
}

impl Operator for TripwireOp {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        let ids = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        if ids.values().contains(&self.trigger) {
            if self.panic {
                panic!("tripwire panicked on purpose");
            }
            return Err(Error::Injected(format!("row {} is poisoned", self.trigger)));
        }
        out.push(batch);
        Ok(())
    }
}

fn tripwire_job(panic: bool) -> JobGraph {
    let mut g = JobGraph::new("tripwire");
    let src = g
        .source(
            "peer",
            Arc::new(PeerSourceFactory::new(200_000, 1000)),
            2,
            no_delay(),
        )
        .unwrap();
    let schema = g.schema(src).clone();
    let window = WindowAggregateFactory::new(
        &schema,
        &["k"],
        WindowSpec::tumbling(Duration::from_millis(100)),
        vec![AggregateSpec::count_star("n")],
    )
    .unwrap();
    let trip = g
        .operator(
            "tripwire",
            Arc::new(Tripwire {
                schema,
                trigger: 150_123,
                panic,
            }),
            2,
            &[src],
        )
        .unwrap();
    let w = g.operator("window", Arc::new(window), 2, &[trip]).unwrap();
    g.sink("sink", Arc::new(CollectSinkFactory::new()), 2, w)
        .unwrap();
    g
}

#[test]
fn failing_operator_fails_the_job_naming_operator_and_subtask() {
    let rt = runtime();
    let result = rt.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(60),
            job::run(&tripwire_job(false), &JobConfig::default()),
        )
        .await
    });
    let err = result
        .expect("the job must not hang")
        .expect_err("the job must fail");
    let expected_subtask = {
        // The tripwire subtask owning id 150123's key group.
        use riffle_core::{KeyGroup, KeyHasher, DEFAULT_MAX_PARALLELISM};
        let key: riffle_core::arrow::array::ArrayRef = Arc::new(Int64Array::from(vec![150_123i64]));
        let h = KeyHasher::default().hash_rows(&[key], 1).unwrap()[0];
        KeyGroup::of_hash(h, DEFAULT_MAX_PARALLELISM).subtask(2, DEFAULT_MAX_PARALLELISM)
    };
    match &err {
        RuntimeError::Task {
            operator, subtask, ..
        } => {
            assert_eq!(operator.0, "tripwire");
            assert_eq!(*subtask, expected_subtask);
        }
        other => panic!("unexpected error {other}"),
    }
    assert!(err.to_string().contains("row 150123 is poisoned"), "{err}");
}

#[test]
fn panicking_operator_is_reported_not_propagated() {
    let rt = runtime();
    let result = rt.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(60),
            job::run(&tripwire_job(true), &JobConfig::default()),
        )
        .await
    });
    let err = result
        .expect("the job must not hang")
        .expect_err("the job must fail");
    assert!(
        matches!(&err, RuntimeError::Panic { task, .. } if task.starts_with("tripwire[")),
        "{err}"
    );
    assert!(
        err.to_string().contains("tripwire panicked on purpose"),
        "{err}"
    );
}

/// Counts the rows it has seen; its snapshot is that count.
struct Counter {
    schema: StreamSchema,
}

impl OperatorFactory for Counter {
    fn describe(&self) -> String {
        "counter".into()
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn is_stateful(&self) -> bool {
        true
    }
    fn key_columns(&self, _: usize) -> Option<Vec<usize>> {
        Some(vec![1])
    }
    fn create(&self, _: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(CounterOp { rows: 0 }))
    }
}

struct CounterOp {
    rows: u64,
}

impl Operator for CounterOp {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, _: &mut Vec<RecordBatch>) -> Result<()> {
        self.rows += batch.num_rows() as u64;
        Ok(())
    }
    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "rows",
            DataType::UInt64,
            false,
        )]));
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(UInt64Array::from(vec![self.rows]))])?;
        Ok(OperatorState::of(vec![batch]))
    }
}

fn state_u64(state: &OperatorState, column: &str) -> u64 {
    let batch = &state.batches[0];
    let c = batch
        .column_by_name(column)
        .unwrap()
        .as_any()
        .downcast_ref::<UInt64Array>()
        .unwrap();
    c.value(0)
}

#[test]
fn aligned_barriers_give_consistent_snapshots() {
    // Two source subtasks feed two counter subtasks over a keyed exchange. For every
    // epoch, the rows the counters had seen at the barrier must equal the rows the
    // sources had emitted before it: nothing from after the barrier leaks in.
    let rt = runtime();
    let mut g = JobGraph::new("aligned");
    let events = 3_000_000u64;
    let src = g
        .source(
            "peer",
            Arc::new(PeerSourceFactory::new(events, 1000)),
            2,
            no_delay(),
        )
        .unwrap();
    let counter = Counter {
        schema: g.schema(src).clone(),
    };
    let c = g.operator("counter", Arc::new(counter), 2, &[src]).unwrap();
    g.sink("sink", Arc::new(CollectSinkFactory::new()), 2, c)
        .unwrap();
    let (acks, tasks) = rt.block_on(async {
        let mut handle = job::start(
            &g,
            &JobConfig {
                channel_capacity: 2,
                ..JobConfig::default()
            },
            true,
        )
        .unwrap();
        let tasks = handle.task_count();
        let mut acks_rx = handle.acks.take().unwrap();
        let injector = handle.barrier_injector();
        let injecting = tokio::spawn(async move {
            for epoch in 1..=20 {
                tokio::time::sleep(Duration::from_millis(3)).await;
                injector.inject(Barrier {
                    epoch: Epoch(epoch),
                    kind: BarrierKind::Checkpoint,
                });
            }
        });
        let summary = handle.wait().await.unwrap();
        injecting.await.unwrap();
        assert_eq!(summary.source_rows, events);
        let mut acks = Vec::new();
        while let Ok(ack) = acks_rx.try_recv() {
            acks.push(ack);
        }
        (acks, tasks)
    });
    let mut by_epoch: HashMap<Epoch, (usize, u64, u64)> = HashMap::new();
    for ack in &acks {
        let entry = by_epoch.entry(ack.epoch).or_default();
        entry.0 += 1;
        for (op, state) in &ack.states {
            match op.0.as_str() {
                "peer" => {
                    // next_id is absolute; subtask ranges start at 0 and events / 2.
                    let start = if ack.subtask == 0 { 0 } else { events / 2 };
                    entry.1 += state_u64(state, "next_id") - start;
                }
                "counter" => entry.2 += state_u64(state, "rows"),
                _ => {}
            }
        }
    }
    let complete: Vec<_> = by_epoch
        .iter()
        .filter(|(_, (n, _, _))| *n == tasks)
        .collect();
    assert!(
        !complete.is_empty(),
        "no epoch completed; acks: {}",
        acks.len()
    );
    for (epoch, (_, emitted, counted)) in complete {
        assert_eq!(emitted, counted, "epoch {epoch}: sources emitted {emitted} rows before the barrier, counters saw {counted}");
    }
}

#[test]
fn stateless_neighbours_chain_and_keyed_edges_split_tasks() {
    let mut g = JobGraph::new("chain");
    let src = g
        .source(
            "peer",
            Arc::new(PeerSourceFactory::new(10, 10)),
            2,
            no_delay(),
        )
        .unwrap();
    let f = FilterFactory::new(g.schema(src), col("v").gt(lit(3i64))).unwrap();
    let f = g.operator("filter", Arc::new(f), 2, &[src]).unwrap();
    let p = ProjectFactory::new(g.schema(f), vec![col("k"), col("v")]).unwrap();
    let p = g.operator("project", Arc::new(p), 2, &[f]).unwrap();
    let w = WindowAggregateFactory::new(
        g.schema(p),
        &["k"],
        WindowSpec::tumbling(Duration::from_secs(1)),
        vec![AggregateSpec::count_star("n")],
    )
    .unwrap();
    let w = g.operator("window", Arc::new(w), 2, &[p]).unwrap();
    g.sink("sink", Arc::new(CollectSinkFactory::new()), 1, w)
        .unwrap();
    let plan = PhysicalPlan::compile(&g);
    let names: Vec<Vec<String>> = plan
        .chains
        .iter()
        .map(|c| {
            c.nodes
                .iter()
                .map(|n| g.nodes()[n.0].id.0.clone())
                .collect()
        })
        .collect();
    assert_eq!(
        names,
        vec![
            vec!["peer", "filter", "project"],
            vec!["window"],
            vec!["sink"]
        ]
    );
    let text = plan.explain(&g);
    assert!(text.contains("keyed by (k)"), "{text}");
    assert!(text.contains("stateful"), "{text}");
}

#[test]
fn broadcast_and_round_robin_deliver_rows_as_promised() {
    // 1 source subtask -> 3 pass-through subtasks: broadcast gives each every row,
    // round robin gives the rows once in total.
    let rt = runtime();
    for (exchange, copies) in [
        (riffle_runtime::Exchange::Broadcast, 3u64),
        (riffle_runtime::Exchange::RoundRobin, 1),
    ] {
        let mut g = JobGraph::new("fan-out");
        let src = g
            .source(
                "peer",
                Arc::new(PeerSourceFactory::new(10_000, 100)),
                1,
                no_delay(),
            )
            .unwrap();
        let pass = FilterFactory::new(g.schema(src), col("v").gt_eq(lit(0i64))).unwrap();
        let pass = g
            .operator_with_exchanges("pass", Arc::new(pass), 3, &[(src, exchange.clone())])
            .unwrap();
        let sink = CollectSinkFactory::new();
        g.sink("sink", Arc::new(sink.clone()), 3, pass).unwrap();
        let summary = rt.block_on(job::run(&g, &JobConfig::default())).unwrap();
        assert_eq!(summary.sink_rows, 10_000 * copies, "{exchange:?}");
        let mut ids: Vec<i64> = sink
            .batches()
            .iter()
            .flat_map(|b| {
                b.column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 10_000, "{exchange:?}: every id arrives");
    }
    let mut g = JobGraph::new("bad");
    let src = g
        .source(
            "peer",
            Arc::new(PeerSourceFactory::new(10, 10)),
            1,
            no_delay(),
        )
        .unwrap();
    let pass = FilterFactory::new(g.schema(src), col("v").gt_eq(lit(0i64))).unwrap();
    let err = g
        .operator_with_exchanges(
            "pass",
            Arc::new(pass),
            3,
            &[(src, riffle_runtime::Exchange::Forward)],
        )
        .err()
        .unwrap();
    assert!(err.to_string().contains("equal parallelism"), "{err}");
}

#[test]
fn duplicate_operator_names_are_refused() {
    let mut g = JobGraph::new("dup");
    g.source(
        "peer",
        Arc::new(PeerSourceFactory::new(10, 10)),
        1,
        no_delay(),
    )
    .unwrap();
    let err = g
        .source(
            "peer",
            Arc::new(PeerSourceFactory::new(10, 10)),
            1,
            no_delay(),
        )
        .err()
        .unwrap();
    assert!(err.to_string().contains("unique"), "{err}");
}

/// Two sinks of one graph writing one directory (here spelled two ways) would write the
/// same file names: the graph refuses the second, naming both.
#[test]
fn a_second_sink_into_the_same_directory_is_refused() {
    use riffle_connectors::sinks::{FileFormat, FileSinkFactory, RollingPolicy};
    let dir = tempfile::tempdir().unwrap();
    let mut g = JobGraph::new("two sinks");
    let src = g
        .source(
            "peer",
            Arc::new(PeerSourceFactory::new(10, 10)),
            1,
            no_delay(),
        )
        .unwrap();
    let files = |path: std::path::PathBuf| {
        Arc::new(FileSinkFactory::new(
            path,
            FileFormat::Jsonl,
            RollingPolicy::default(),
        ))
    };
    g.sink("first", files(dir.path().join("out")), 1, src)
        .unwrap();
    g.sink("elsewhere", files(dir.path().join("out2")), 1, src)
        .unwrap();
    let spelled = dir.path().join("x/../out/");
    match g.sink("second", files(spelled), 1, src) {
        Err(RuntimeError::Graph(message)) => assert!(
            message.contains("`first`") && message.contains("`second`"),
            "{message}"
        ),
        other => panic!("not refused: {:?}", other.map(|_| ())),
    }
}

/// Passes rows through; a stateful operator that notes the share of `--state-memory`
/// each of its subtasks was given.
struct BudgetNoter {
    schema: StreamSchema,
    keeps_to_budget: bool,
    shares: Arc<std::sync::Mutex<Vec<Option<u64>>>>,
}

impl OperatorFactory for BudgetNoter {
    fn describe(&self) -> String {
        "budget noter".into()
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn is_stateful(&self) -> bool {
        true
    }
    fn keeps_to_state_memory(&self) -> bool {
        self.keeps_to_budget
    }
    fn key_columns(&self, _: usize) -> Option<Vec<usize>> {
        Some(vec![0])
    }
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Operator>> {
        let share = ctx.state_memory.as_ref().map(|m| m.bytes);
        self.shares.lock().unwrap().push(share);
        Ok(Box::new(PassThrough))
    }
}

struct PassThrough;

impl Operator for PassThrough {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        out.push(batch);
        Ok(())
    }
    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        Ok(OperatorState::default())
    }
    fn restore(&mut self, _: OperatorState) -> Result<()> {
        Ok(())
    }
}

#[test]
fn the_state_budget_is_shared_by_the_operators_that_keep_to_it() {
    let rt = runtime();
    let mut g = JobGraph::new("budget");
    let src = g
        .source(
            "peer",
            Arc::new(PeerSourceFactory::new(10_000, 1000)),
            1,
            no_delay(),
        )
        .unwrap();
    let noter = |keeps_to_budget| {
        let shares = Arc::new(std::sync::Mutex::new(Vec::new()));
        let factory = BudgetNoter {
            schema: g.schema(src).clone(),
            keeps_to_budget,
            shares: shares.clone(),
        };
        (factory, shares)
    };
    let (spills, spilling_shares) = noter(true);
    let (holds, holding_shares) = noter(false);
    let a = g.operator("spills", Arc::new(spills), 2, &[src]).unwrap();
    let b = g.operator("holds", Arc::new(holds), 2, &[a]).unwrap();
    g.sink("sink", Arc::new(CollectSinkFactory::new()), 2, b)
        .unwrap();
    assert_eq!(
        g.state_outside_budget(),
        (vec![&riffle_core::OperatorId("holds".into())], true)
    );
    let budget = riffle_core::StateMemory {
        bytes: 1000,
        spill_dir: std::env::temp_dir(),
    };
    rt.block_on(async {
        let config = JobConfig {
            state_memory: Some(budget),
            ..JobConfig::default()
        };
        job::start(&g, &config, false).unwrap().wait().await
    })
    .unwrap();
    // The two subtasks that keep to the budget share it; the two that hold their state
    // in memory anyway are given none of it.
    assert_eq!(*spilling_shares.lock().unwrap(), [Some(500), Some(500)]);
    assert_eq!(*holding_shares.lock().unwrap(), [None, None]);
}
