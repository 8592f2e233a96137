//! The peer job, defined identically for riffle and Apache Flink so both can be run on
//! one machine: `id = 0..N`, `k = id % 1000`, `v = id % 97`, 100,000 events per
//! event-second, watermark delay 1 s.

use crate::error::BenchError;
use datafusion_expr::{col, lit};
use riffle_connectors::PeerSourceFactory;
use riffle_core::SinkFactory;
use riffle_operators::{
    AggregateFunction, AggregateSpec, FilterFactory, ProjectFactory, WindowAggregateFactory,
    WindowSpec,
};
use riffle_runtime::{JobGraph, WatermarkStrategy};
use std::sync::Arc;
use std::time::Duration;

/// Which peer job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerJob {
    /// `SELECT id, k, v * 2 WHERE v % 2 = 0`.
    Stateless,
    /// 10 s tumbling `COUNT(*), SUM(v)` per `k`.
    Window,
}

impl PeerJob {
    /// The job's name in `riffle bench --job`.
    pub fn name(self) -> &'static str {
        match self {
            PeerJob::Stateless => "peer-stateless",
            PeerJob::Window => "peer-window",
        }
    }

    /// Parses `peer-stateless` or `peer-window`.
    ///
    /// # Errors
    /// Any other name.
    pub fn parse(name: &str) -> Result<Self, BenchError> {
        [PeerJob::Stateless, PeerJob::Window]
            .into_iter()
            .find(|j| j.name() == name)
            .ok_or_else(|| BenchError::Unknown {
                kind: "job",
                name: name.into(),
                choices: "peer-stateless, peer-window".into(),
            })
    }

    /// The same job as a SQL pipeline over a `sequence` table (which `--events`
    /// sizes) into a blackhole, for runs as a child `riffle run`, e.g. on several
    /// workers. Its event time is whole milliseconds; the Rust job's is finer.
    pub fn sql_text(self) -> String {
        let query = match self {
            PeerJob::Stateless => "SELECT id, k, v * 2 AS v2 FROM peer WHERE v % 2 = 0",
            PeerJob::Window => {
                "SELECT k, window_start, window_end, COUNT(*) AS cnt, SUM(v) AS sum_v\n\
                 FROM TABLE(TUMBLE(TABLE peer, DESCRIPTOR(ts), INTERVAL '10' SECOND))\n\
                 GROUP BY k, window_start, window_end"
            }
        };
        format!(
            "CREATE TABLE peer WITH ('connector' = 'sequence', 'events' = '1M');\n\
             CREATE TABLE out WITH ('connector' = 'blackhole');\n\
             INSERT INTO out\n{query};\n"
        )
    }

    /// The job over `events` rows at `parallelism`, writing into `sink`.
    ///
    /// # Errors
    /// Planning errors.
    pub fn build(
        self,
        events: u64,
        parallelism: usize,
        sink: Arc<dyn SinkFactory>,
    ) -> Result<JobGraph, BenchError> {
        let mut graph = JobGraph::new(self.name());
        let watermarks = WatermarkStrategy {
            max_out_of_orderness: Duration::from_secs(1),
            idle_timeout: None,
        };
        let source = graph.source(
            "peer",
            Arc::new(PeerSourceFactory::new(events, 8192)),
            parallelism,
            watermarks,
        )?;
        let output = match self {
            PeerJob::Stateless => {
                let even =
                    FilterFactory::new(graph.schema(source), (col("v") % lit(2i64)).eq(lit(0i64)))?;
                let even = graph.operator("even", Arc::new(even), parallelism, &[source])?;
                let project = ProjectFactory::new(
                    graph.schema(even),
                    vec![col("id"), col("k"), (col("v") * lit(2i64)).alias("v2")],
                )?;
                graph.operator("project", Arc::new(project), parallelism, &[even])?
            }
            PeerJob::Window => {
                let window = WindowAggregateFactory::new(
                    graph.schema(source),
                    &["k"],
                    WindowSpec::tumbling(Duration::from_secs(10)),
                    vec![
                        AggregateSpec::count_star("cnt"),
                        AggregateSpec::new(AggregateFunction::Sum, "v", "sum_v"),
                    ],
                )?;
                graph.operator("window", Arc::new(window), parallelism, &[source])?
            }
        };
        graph.sink("sink", sink, parallelism, output)?;
        Ok(graph)
    }
}
