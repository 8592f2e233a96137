//! Delta snapshots whose operator stops holding what committed snapshots wrote
//! (`riffle_core::hand_over`): the checkpoint writer finds those batches in the files
//! of the epoch before, and after an epoch that failed, when it may not reference
//! them, the operator writes its state whole again. A real job on a store that fails
//! one epoch's state upload: every later epoch commits, and the last checkpoint holds
//! every group exactly once.

use crate::common;

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use riffle_connectors::sinks::CollectSinkFactory;
use riffle_connectors::PeerSourceFactory;
use riffle_core::arrow::array::AsArray;
use riffle_core::arrow::datatypes::Int64Type;
use riffle_core::{Epoch, OperatorId};
use riffle_operators::{AggregateSpec, UpdatingAggregateFactory};
use riffle_runtime::{CheckpointConfig, JobGraph, RestoredJob};
use riffle_state::{CheckpointStore, StateRoot};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const EVENTS: u64 = 400_000;

/// An in-memory store that fails the first upload of the aggregate's state for one
/// epoch: that epoch fails, the job goes on.
#[derive(Debug)]
struct FailsOneUpload {
    inner: InMemory,
    path_part: String,
    failed: AtomicBool,
}

impl fmt::Display for FailsOneUpload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FailsOneUpload({})", self.path_part)
    }
}

impl FailsOneUpload {
    fn fails(&self, location: &Path) -> bool {
        location.as_ref().contains(&self.path_part) && !self.failed.swap(true, Ordering::SeqCst)
    }
}

fn injected() -> object_store::Error {
    object_store::Error::Generic {
        store: "test",
        source: "an injected upload failure".into(),
    }
}

#[async_trait]
impl ObjectStore for FailsOneUpload {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        if self.fails(location) {
            return Err(injected());
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        if self.fails(location) {
            return Err(injected());
        }
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// `count(*) AS n GROUP BY id` over the peer source, at parallelism 2: every group is
/// new, so the chain restarts only every 32 snapshots (not for being overwritten).
fn job() -> (JobGraph, CollectSinkFactory) {
    let mut g = JobGraph::new("handed-over");
    let src = g
        .source(
            "peer",
            Arc::new(PeerSourceFactory::new(EVENTS, 200)),
            2,
            common::no_delay(),
        )
        .unwrap();
    let agg =
        UpdatingAggregateFactory::new(g.schema(src), &["id"], vec![AggregateSpec::count_star("n")])
            .unwrap();
    let a = g.operator("agg", Arc::new(agg), 2, &[src]).unwrap();
    let sink = CollectSinkFactory::new();
    g.sink("sink", Arc::new(sink.clone()), 2, a).unwrap();
    (g, sink)
}

/// The last value of column `n` per `id` over `batches`, in order.
fn last_per_key<'a>(
    batches: impl Iterator<Item = &'a riffle_core::RecordBatch>,
    n: &str,
) -> HashMap<i64, i64> {
    let mut last = HashMap::new();
    for b in batches {
        let k = b
            .column_by_name("id")
            .unwrap()
            .as_primitive::<Int64Type>()
            .clone();
        let v = b
            .column_by_name(n)
            .unwrap()
            .as_primitive::<Int64Type>()
            .clone();
        for r in 0..b.num_rows() {
            last.insert(k.value(r), v.value(r));
        }
    }
    last
}

#[test]
fn after_a_failed_epoch_handed_over_state_is_written_whole_and_every_later_epoch_commits() {
    let rt = common::runtime();
    let failing = Arc::new(FailsOneUpload {
        inner: InMemory::new(),
        path_part: "epoch=000008/agg/".to_string(),
        failed: AtomicBool::new(false),
    });
    let mut root = StateRoot::parse("memory://").unwrap();
    root.store = failing.clone();
    root.bulk = failing.clone();
    let store = CheckpointStore::new(root, "handed-over");
    let checkpoints = CheckpointConfig {
        interval: Duration::from_millis(2),
        retain: 2,
        ..CheckpointConfig::default()
    };
    let (graph, sink) = job();
    let report = common::run_checkpointed(&rt, &graph, &store, checkpoints);
    assert!(
        failing.failed.load(Ordering::SeqCst),
        "epoch 8 was never uploaded: the test proves nothing"
    );
    assert_eq!(
        report.errors.len(),
        1,
        "only the injected failure: {:?}",
        report.errors
    );
    assert!(report.errors[0].contains("injected"), "{:?}", report.errors);
    let after: Vec<Epoch> = report
        .committed
        .iter()
        .copied()
        .filter(|e| e.0 > 8)
        .collect();
    assert!(
        after.len() >= 3,
        "epochs after the failed one commit: {:?}",
        report.committed
    );
    assert!(report.end_of_input_committed);

    // The output: every event counted once per key.
    let output = sink.batches();
    let want = last_per_key(output.iter(), "n");
    assert_eq!(want.values().sum::<i64>(), EVENTS as i64);

    // The last checkpoint, made of files written whole after the failure and reused
    // since, holds every group with its final count.
    let newest = *report.committed.last().unwrap();
    let manifest = rt.block_on(store.read_manifest(newest)).unwrap().unwrap();
    let restored = rt.block_on(RestoredJob::load(&store, &manifest)).unwrap();
    let state = &restored.operators[&OperatorId("agg".into())];
    let batches = state
        .subtasks
        .values()
        .flat_map(|s| s.decode().unwrap().batches)
        .collect::<Vec<_>>();
    let first = batches.first().expect("state batches");
    let count_column = first
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .find(|n| n.starts_with("n__"))
        .expect("the count's state column");
    let got = last_per_key(batches.iter(), &count_column);
    assert_eq!(got, want, "the checkpoint's groups are the output's");
}
