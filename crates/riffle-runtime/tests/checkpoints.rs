//! Checkpoints end to end: the coordinator commits epochs while the job runs, and a job
//! restored from one — at the same or another operator parallelism — emits exactly the
//! windows that were still open at the barrier, with the same values.

use crate::common;

use common::{peer_graph, run_checkpointed, runtime};
use riffle_connectors::sinks::CollectSinkFactory;
use riffle_connectors::PeerSourceFactory;
use riffle_core::arrow::array::AsArray;
use riffle_core::arrow::datatypes::{Int64Type, TimestampNanosecondType};
use riffle_core::{OperatorId, RecordBatch};
use riffle_operators::{AggregateFunction, AggregateSpec, WindowAggregateFactory, WindowSpec};
use riffle_runtime::job::{self, JobConfig};
use riffle_runtime::{CheckpointConfig, JobGraph, RestoredJob, WatermarkStrategy};
use riffle_state::{CheckpointStore, ManifestStatus, StateRoot};
use std::sync::Arc;
use std::time::Duration;

const EVENTS: u64 = 600_000;

fn job(window_parallelism: usize) -> (JobGraph, CollectSinkFactory) {
    job_with_sources(2, window_parallelism)
}

fn job_with_sources(
    source_parallelism: usize,
    window_parallelism: usize,
) -> (JobGraph, CollectSinkFactory) {
    let mut g = JobGraph::new("peer-window");
    let watermarks = WatermarkStrategy {
        max_out_of_orderness: Duration::from_millis(50),
        idle_timeout: None,
    };
    let src = g
        .source(
            "peer",
            Arc::new(PeerSourceFactory::new(EVENTS, 500)),
            source_parallelism,
            watermarks,
        )
        .unwrap();
    let window = WindowAggregateFactory::new(
        g.schema(src),
        &["k"],
        WindowSpec::tumbling(Duration::from_millis(100)),
        vec![
            AggregateSpec::count_star("n"),
            AggregateSpec::new(AggregateFunction::Sum, "v", "sum_v"),
        ],
    )
    .unwrap();
    let w = g
        .operator("window", Arc::new(window), window_parallelism, &[src])
        .unwrap();
    let sink = CollectSinkFactory::new();
    g.sink("sink", Arc::new(sink.clone()), window_parallelism, w)
        .unwrap();
    (g, sink)
}

/// (window_start, k, n, sum_v), sorted.
fn rows(batches: &[RecordBatch]) -> Vec<(i64, i64, i64, i64)> {
    let mut out = Vec::new();
    for b in batches {
        let col = |n: &str| b.column_by_name(n).unwrap().clone();
        let (ws, k, n, s) = (col("window_start"), col("k"), col("n"), col("sum_v"));
        for r in 0..b.num_rows() {
            out.push((
                ws.as_primitive::<TimestampNanosecondType>().value(r),
                k.as_primitive::<Int64Type>().value(r),
                n.as_primitive::<Int64Type>().value(r),
                s.as_primitive::<Int64Type>().value(r),
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn a_restored_job_emits_exactly_the_windows_open_at_the_checkpoint() {
    let rt = runtime();
    let store = CheckpointStore::new(StateRoot::parse("memory://").unwrap(), "peer-window");
    let checkpoints = CheckpointConfig {
        interval: Duration::from_millis(2),
        retain: 4,
        ..CheckpointConfig::default()
    };

    // The uninterrupted run, taking checkpoints as it goes.
    let (graph, sink) = job(2);
    let report = run_checkpointed(&rt, &graph, &store, checkpoints);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(
        !report.committed.is_empty(),
        "no epoch committed during the run; the test would prove nothing"
    );
    let full = rows(&sink.batches());
    assert_eq!(
        full.iter().map(|r| r.2).sum::<i64>(),
        EVENTS as i64,
        "every event counted once"
    );

    // GC kept the newest four committed epochs (an epoch still in flight when the
    // sources ended stays partial, to be swept by the next recovery).
    let with_manifest: Vec<_> = rt.block_on(async {
        let mut found = Vec::new();
        for e in store.list_epochs().await.unwrap() {
            if store.read_manifest(e).await.unwrap().is_some() {
                found.push(e);
            }
        }
        found
    });
    let newest: Vec<_> = report
        .committed
        .iter()
        .rev()
        .take(4)
        .rev()
        .cloned()
        .collect();
    assert_eq!(
        with_manifest, newest,
        "retention keeps the newest 4 committed epochs"
    );
    assert!(report.end_of_input_committed);
    assert_eq!(
        rt.block_on(store.latest_hint()),
        report.committed.last().copied()
    );
    // The newest epoch is the end-of-input one (every window fired), and so may be the
    // ones just before it; restore the newest taken while windows were open.
    // The aggregate's own bookkeeping (which windows fired) is a batch of its own.
    let open_from = |restored: &RestoredJob| {
        restored.operators[&OperatorId("window".into())]
            .subtasks
            .values()
            .flat_map(|s| s.decode().unwrap().batches)
            .filter_map(|b| b.column_by_name("pane_start").cloned())
            .flat_map(|c| {
                c.as_primitive::<TimestampNanosecondType>()
                    .values()
                    .to_vec()
            })
            .min()
    };
    let (manifest, restored, open_from) = newest
        .iter()
        .rev()
        .map(|e| rt.block_on(store.read_manifest(*e)).unwrap().unwrap())
        .find_map(|m| {
            let restored = rt.block_on(RestoredJob::load(&store, &m)).unwrap();
            let open = open_from(&restored)?;
            Some((m, Arc::new(restored), open))
        })
        .expect("a retained epoch taken while windows were open");
    assert_eq!(manifest.status, ManifestStatus::Committed);
    let expected: Vec<_> = full.iter().filter(|r| r.0 >= open_from).cloned().collect();
    assert!(
        expected.len() < full.len(),
        "some windows fired before the checkpoint"
    );

    for window_parallelism in [2, 1, 4] {
        let (graph, sink) = job(window_parallelism);
        let config = JobConfig {
            restore: Some(restored.clone()),
            ..JobConfig::default()
        };
        rt.block_on(job::run(&graph, &config)).unwrap();
        assert_eq!(
            rows(&sink.batches()),
            expected,
            "restored at window parallelism {window_parallelism}"
        );
    }
}

#[test]
fn restore_refuses_state_the_plan_cannot_take() {
    let rt = runtime();
    let store = CheckpointStore::new(StateRoot::parse("memory://").unwrap(), "peer-window");
    let (graph, _) = job(2);
    let checkpoints = CheckpointConfig {
        interval: Duration::from_millis(2),
        ..CheckpointConfig::default()
    };
    let report = run_checkpointed(&rt, &graph, &store, checkpoints);
    let epoch = *report.committed.last().expect("an epoch committed");
    let manifest = rt.block_on(store.read_manifest(epoch)).unwrap().unwrap();
    let restored = Arc::new(rt.block_on(RestoredJob::load(&store, &manifest)).unwrap());

    // A source at another parallelism.
    let (mut g, src) = peer_graph("peer-window", EVENTS);
    g.sink("sink", Arc::new(CollectSinkFactory::new()), 1, src)
        .unwrap();
    let config = JobConfig {
        restore: Some(restored.clone()),
        ..JobConfig::default()
    };
    let err = rt
        .block_on(job::run(&g, &config))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("`window`"),
        "the window's state has no operator in this plan: {err}"
    );

    let (g, _) = job_with_sources(1, 2);
    let err = rt
        .block_on(job::run(&g, &config))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("`peer`") && err.contains("parallelism 2"),
        "{err}"
    );
}
