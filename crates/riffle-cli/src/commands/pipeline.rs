//! What names a Nexmark pipeline on the command line (query, generator settings,
//! parallelism), shared by `riffle nexmark` and `riffle savepoint check`.

use super::run::check_parallelism;
use crate::units::{parse_count, parse_duration};
use anyhow::{Context, Result};
use riffle_bench::queries::{self, Query, QueryOptions};
use riffle_connectors::nexmark::NexmarkConfig;
use riffle_core::SinkFactory;
use riffle_runtime::JobGraph;
use std::sync::Arc;
use std::time::Duration;

/// The query and the settings that shape its dataflow.
#[derive(Debug, Clone, clap::Args)]
pub struct QueryArgs {
    /// Query to run: q0, q1, q2, q3, q4, q5, q7, q8 or q11.
    #[arg(long, short, default_value = "q5")]
    pub query: String,
    /// Total events to generate (persons + auctions + bids), e.g. 10M.
    #[arg(long, short, default_value = "10M", value_parser = parse_count)]
    pub events: u64,
    /// Subtasks per operator. A run restored from a savepoint or checkpoint may use
    /// another parallelism than the state was taken at.
    #[arg(long, short, default_value_t = 2)]
    pub parallelism: usize,
    /// Key groups: the most subtasks a keyed operator can ever have. Fixed for the
    /// life of the state: a restore refuses another value.
    #[arg(long, default_value_t = riffle_core::DEFAULT_MAX_PARALLELISM)]
    pub max_parallelism: u16,
    /// Events per second of event time (sets timestamps, not speed), e.g. 100K.
    #[arg(long, default_value = "10M", value_parser = parse_count)]
    pub rate: u64,
    /// Generate at most this many events per second of wall time, e.g. 200K (default:
    /// as fast as possible). Makes a demo job run long enough to stop it.
    #[arg(long, value_parser = parse_count)]
    pub throttle: Option<u64>,
    /// Out-of-order group size (1 = events in order).
    #[arg(long, default_value_t = 1)]
    pub out_of_order: u64,
    /// Watermark delay behind the newest event time.
    #[arg(long, default_value = "4s", value_parser = parse_duration)]
    pub watermark_delay: Duration,
}

impl QueryArgs {
    /// The query named by `--query`.
    ///
    /// # Errors
    /// An unknown query.
    pub fn query(&self) -> Result<Query> {
        Ok(Query::parse(&self.query)?)
    }

    /// Builds the pipeline's graph writing into `sink`.
    ///
    /// # Errors
    /// Invalid settings or a query that cannot be built.
    pub fn build(&self, sink: Arc<dyn SinkFactory>) -> Result<JobGraph> {
        let query = self.query()?;
        check_parallelism(self.parallelism, self.max_parallelism)?;
        anyhow::ensure!(self.rate >= 1, "--rate must be at least 1 event per second");
        anyhow::ensure!(
            self.throttle != Some(0),
            "--throttle must be at least 1 event per second"
        );
        let opts = QueryOptions {
            nexmark: NexmarkConfig {
                events: Some(self.events),
                first_event_rate: self.rate,
                out_of_order_group_size: self.out_of_order.max(1),
                max_events_per_second: self.throttle,
                ..NexmarkConfig::default()
            },
            parallelism: self.parallelism,
            watermark_delay: self.watermark_delay,
            max_parallelism: self.max_parallelism,
        };
        queries::build(query, &opts, sink).with_context(|| format!("building {query}"))
    }
}
