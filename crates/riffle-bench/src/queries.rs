//! The Nexmark queries as riffle pipelines, built with the Rust API.
//!
//! Semantics follow `shared/nexmark-spec.md`; where a query's SQL in the reference suites
//! has several readings, the comment on its builder says which one riffle implements.

use crate::error::BenchError;
use datafusion_expr::{cast, col, lit, Expr};
use riffle_connectors::nexmark::{EventGenerator, NexmarkConfig, NexmarkTable};
use riffle_connectors::NexmarkSourceFactory;
use riffle_core::arrow::datatypes::DataType;
use riffle_core::SinkFactory;
use riffle_operators::{
    AggregateFunction, AggregateSpec, FilterFactory, IntervalMaxJoinFactory, JoinKind,
    ProjectFactory, SessionAggregateFactory, StreamJoinFactory, UpdatingAggregateFactory,
    WindowAggregateFactory, WindowJoinFactory, WindowMaxRowsFactory, WindowSpec,
};
use riffle_runtime::{JobGraph, NodeId, WatermarkStrategy};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A Nexmark query riffle implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Query {
    /// Pass-through of bids.
    Q0,
    /// Bids with the price in euros.
    Q1,
    /// Bids on auctions whose id is a multiple of 123.
    Q2,
    /// Sellers in OR/ID/CA with their category-10 auctions.
    Q3,
    /// Average closing price per category.
    Q4,
    /// Hot items: auctions with the most bids per hopping window.
    Q5,
    /// Highest bid per tumbling window.
    Q7,
    /// New people who opened an auction in the same window.
    Q8,
    /// Bids per bidder per session.
    Q11,
}

impl Query {
    /// Every implemented query, in order.
    pub const ALL: [Query; 9] = [
        Query::Q0,
        Query::Q1,
        Query::Q2,
        Query::Q3,
        Query::Q4,
        Query::Q5,
        Query::Q7,
        Query::Q8,
        Query::Q11,
    ];

    /// Parses `q5` (or `5`).
    ///
    /// # Errors
    /// Names no implemented query.
    pub fn parse(name: &str) -> Result<Query, BenchError> {
        let n = name.trim().trim_start_matches(['q', 'Q']);
        Query::ALL
            .into_iter()
            .find(|q| q.to_string()[1..] == *n)
            .ok_or_else(|| BenchError::Unknown {
                kind: "query",
                name: name.into(),
                choices: Query::ALL.map(|q| q.to_string()).join(", "),
            })
    }
}

impl fmt::Display for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = match self {
            Query::Q0 => 0,
            Query::Q1 => 1,
            Query::Q2 => 2,
            Query::Q3 => 3,
            Query::Q4 => 4,
            Query::Q5 => 5,
            Query::Q7 => 7,
            Query::Q8 => 8,
            Query::Q11 => 11,
        };
        write!(f, "q{n}")
    }
}

/// How a query runs.
#[derive(Debug, Clone)]
pub struct QueryOptions {
    /// The generator's settings (events, rate, disorder).
    pub nexmark: NexmarkConfig,
    /// Parallelism of sources and operators.
    pub parallelism: usize,
    /// Watermark delay behind the largest event time seen (the reference SQL uses 4 s).
    pub watermark_delay: Duration,
    /// Key groups: the most subtasks an operator can have (set before nodes are added,
    /// which are checked against it).
    pub max_parallelism: u16,
}

impl Default for QueryOptions {
    fn default() -> Self {
        Self {
            nexmark: NexmarkConfig::default(),
            parallelism: 1,
            watermark_delay: Duration::from_secs(4),
            max_parallelism: riffle_core::DEFAULT_MAX_PARALLELISM,
        }
    }
}

/// Window sizes of the reference queries.
pub const Q5_WINDOW: Duration = Duration::from_secs(10);
/// Slide of q5's hopping window.
pub const Q5_SLIDE: Duration = Duration::from_secs(2);
/// Tumbling window of q7 and q8.
pub const TUMBLE_10S: Duration = Duration::from_secs(10);
/// Session gap of q11.
pub const Q11_GAP: Duration = Duration::from_secs(10);

struct Builder<'a> {
    graph: JobGraph,
    opts: &'a QueryOptions,
    generator: Arc<EventGenerator>,
}

impl<'a> Builder<'a> {
    fn source(&mut self, table: NexmarkTable) -> Result<NodeId, BenchError> {
        let factory = NexmarkSourceFactory::with_generator(table, self.generator.clone());
        let watermarks = WatermarkStrategy {
            max_out_of_orderness: self.opts.watermark_delay,
            idle_timeout: None,
        };
        Ok(self.graph.source(
            table.name(),
            Arc::new(factory),
            self.opts.parallelism,
            watermarks,
        )?)
    }

    fn project(
        &mut self,
        name: &str,
        input: NodeId,
        exprs: Vec<Expr>,
    ) -> Result<NodeId, BenchError> {
        let f = ProjectFactory::new(self.graph.schema(input), exprs)?;
        Ok(self
            .graph
            .operator(name, Arc::new(f), self.opts.parallelism, &[input])?)
    }

    fn filter(&mut self, name: &str, input: NodeId, predicate: Expr) -> Result<NodeId, BenchError> {
        let f = FilterFactory::new(self.graph.schema(input), predicate)?;
        Ok(self
            .graph
            .operator(name, Arc::new(f), self.opts.parallelism, &[input])?)
    }

    /// Local then global max-rows stages (see [`WindowMaxRowsFactory`]).
    fn max_rows(
        &mut self,
        input: NodeId,
        value: &str,
        size: Duration,
    ) -> Result<NodeId, BenchError> {
        let local = WindowMaxRowsFactory::new(self.graph.schema(input), value, size, false)?;
        let local = self.graph.operator(
            "max_rows_local",
            Arc::new(local),
            self.opts.parallelism,
            &[input],
        )?;
        let global = WindowMaxRowsFactory::new(self.graph.schema(local), value, size, true)?;
        Ok(self
            .graph
            .operator("max_rows_global", Arc::new(global), 1, &[local])?)
    }
}

/// Builds `query` writing into `sink` (at the query's parallelism, or 1 after a global stage).
///
/// # Errors
/// Planning errors (a bug in the query definitions) or invalid options.
pub fn build(
    query: Query,
    opts: &QueryOptions,
    sink: Arc<dyn SinkFactory>,
) -> Result<JobGraph, BenchError> {
    let mut graph = JobGraph::new(format!("nexmark-{query}"));
    graph.max_parallelism = opts.max_parallelism;
    let mut b = Builder {
        graph,
        opts,
        generator: Arc::new(EventGenerator::new(opts.nexmark.clone())),
    };
    let p = opts.parallelism;
    let (output, parallelism) = match query {
        // SELECT auction, bidder, price, date_time, extra FROM bid
        Query::Q0 => {
            let bids = b.source(NexmarkTable::Bid)?;
            (
                b.project(
                    "q0",
                    bids,
                    vec![
                        col("auction"),
                        col("bidder"),
                        col("price"),
                        col("date_time"),
                        col("extra"),
                    ],
                )?,
                p,
            )
        }
        // SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid
        // (exact, as in Flink: DECIMAL(3, 3) times the price as DECIMAL(20, 0)).
        Query::Q1 => {
            let bids = b.source(NexmarkTable::Bid)?;
            let rate = lit(datafusion_common::ScalarValue::Decimal128(Some(908), 3, 3));
            let euros = (rate * cast(col("price"), DataType::Decimal128(20, 0))).alias("price");
            (
                b.project(
                    "q1",
                    bids,
                    vec![
                        col("auction"),
                        col("bidder"),
                        euros,
                        col("date_time"),
                        col("extra"),
                    ],
                )?,
                p,
            )
        }
        // SELECT auction, price FROM bid WHERE auction % 123 = 0
        Query::Q2 => {
            let bids = b.source(NexmarkTable::Bid)?;
            let kept = b.filter(
                "q2_filter",
                bids,
                (col("auction") % lit(123i64)).eq(lit(0i64)),
            )?;
            (
                b.project("q2", kept, vec![col("auction"), col("price")])?,
                p,
            )
        }
        // SELECT P.name, P.city, P.state, A.id FROM auction A JOIN person P ON A.seller = P.id
        // WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA'): an unbounded join.
        Query::Q3 => {
            let people = b.source(NexmarkTable::Person)?;
            let auctions = b.source(NexmarkTable::Auction)?;
            let in_states = col("state")
                .eq(lit("OR"))
                .or(col("state").eq(lit("ID")))
                .or(col("state").eq(lit("CA")));
            let sellers = b.filter("q3_people", people, in_states)?;
            let sellers = b.project(
                "q3_people_columns",
                sellers,
                vec![col("id"), col("name"), col("city"), col("state")],
            )?;
            let category = b.filter("q3_auctions", auctions, col("category").eq(lit(10i64)))?;
            let category = b.project(
                "q3_auction_columns",
                category,
                vec![col("id"), col("seller")],
            )?;
            let join = StreamJoinFactory::new(
                b.graph.schema(sellers),
                b.graph.schema(category),
                &["id"],
                &["seller"],
                &["name", "city", "state"],
                &["id"],
            )?;
            (
                b.graph
                    .operator("q3_join", Arc::new(join), p, &[sellers, category])?,
                p,
            )
        }
        // Closing price of an auction = its highest bid with date_time in
        // [auction.date_time, auction.expires], known once the watermark passes `expires`;
        // then the running average closing price per category (an updating result: the
        // newest row per category is the current value).
        Query::Q4 => {
            let auctions = b.source(NexmarkTable::Auction)?;
            let bids = b.source(NexmarkTable::Bid)?;
            // Keep only what the join needs: open auctions are held until they expire.
            let auctions = b.project(
                "q4_auctions",
                auctions,
                vec![col("id"), col("category"), col("date_time"), col("expires")],
            )?;
            let bids = b.project("q4_bids", bids, vec![col("auction"), col("price")])?;
            let closing = IntervalMaxJoinFactory::new(
                b.graph.schema(auctions),
                b.graph.schema(bids),
                "id",
                "auction",
                ("date_time", "expires"),
                "price",
                "final",
                &["id", "category"],
            )?;
            let closing =
                b.graph
                    .operator("q4_closing_price", Arc::new(closing), p, &[auctions, bids])?;
            let average = UpdatingAggregateFactory::new(
                b.graph.schema(closing),
                &["category"],
                vec![AggregateSpec::new(
                    AggregateFunction::Avg,
                    "final",
                    "avg_final",
                )],
            )?;
            (
                b.graph
                    .operator("q4_average", Arc::new(average), p, &[closing])?,
                p,
            )
        }
        // Per hop(10 s, 2 s): count bids per auction, keep the auctions with the most.
        Query::Q5 => {
            let bids = b.source(NexmarkTable::Bid)?;
            let counts = WindowAggregateFactory::new(
                b.graph.schema(bids),
                &["auction"],
                WindowSpec::Hopping {
                    size: Q5_WINDOW,
                    slide: Q5_SLIDE,
                },
                vec![AggregateSpec::count_star("num")],
            )?;
            let counts = b
                .graph
                .operator("q5_counts", Arc::new(counts), p, &[bids])?;
            // Each hop window's results carry _timestamp = end - 1; a tumble of the slide
            // separates consecutive hop windows.
            (b.max_rows(counts, "num", Q5_SLIDE)?, 1)
        }
        // The bids with the highest price per 10 s tumbling window.
        Query::Q7 => {
            let bids = b.source(NexmarkTable::Bid)?;
            let slim = b.project(
                "q7_columns",
                bids,
                vec![
                    col("auction"),
                    col("price"),
                    col("bidder"),
                    col("date_time"),
                    col("extra"),
                ],
            )?;
            (b.max_rows(slim, "price", TUMBLE_10S)?, 1)
        }
        // People who opened an auction in the same 10 s window they registered in:
        // (id, name, window_start) once per window, as the reference's grouped join.
        Query::Q8 => {
            let people = b.source(NexmarkTable::Person)?;
            let auctions = b.source(NexmarkTable::Auction)?;
            // Buffer only what the join emits or matches on.
            let people = b.project("q8_people", people, vec![col("id"), col("name")])?;
            let auctions = b.project("q8_auctions", auctions, vec![col("seller")])?;
            let join = WindowJoinFactory::new(
                JoinKind::LeftSemi,
                b.graph.schema(people),
                b.graph.schema(auctions),
                &["id"],
                &["seller"],
                TUMBLE_10S,
                &["id", "name"],
                &[],
            )?;
            let joined = b
                .graph
                .operator("q8_join", Arc::new(join), p, &[people, auctions])?;
            (
                b.project(
                    "q8",
                    joined,
                    vec![col("id"), col("name"), col("window_start")],
                )?,
                p,
            )
        }
        // Bids per bidder per session (gap 10 s).
        Query::Q11 => {
            let bids = b.source(NexmarkTable::Bid)?;
            let sessions = SessionAggregateFactory::new(
                b.graph.schema(bids),
                &["bidder"],
                Q11_GAP,
                vec![AggregateSpec::count_star("bid_count")],
            )?;
            let sessions = b
                .graph
                .operator("q11_sessions", Arc::new(sessions), p, &[bids])?;
            (
                b.project(
                    "q11",
                    sessions,
                    vec![
                        col("bidder"),
                        col("bid_count"),
                        col("window_start"),
                        col("window_end"),
                    ],
                )?,
                p,
            )
        }
    };
    b.graph.sink("sink", sink, parallelism, output)?;
    Ok(b.graph)
}
