//! The Nexmark queries as SQL pipelines (`examples/nexmark/*.sql`, built into the
//! binary), planned for a benchmark run: file sinks become blackholes and the generator
//! takes the run's settings.

use crate::error::BenchError;
use crate::queries::{Query, QueryOptions};
use riffle_runtime::JobGraph;
use riffle_sql::{plan_pipeline, ConnectorRegistry, PlanOptions, RunSettings};
use std::time::Duration;

/// The text of `examples/nexmark/{query}.sql`.
pub fn example(query: Query) -> &'static str {
    match query {
        Query::Q0 => include_str!("../../../examples/nexmark/q0.sql"),
        Query::Q1 => include_str!("../../../examples/nexmark/q1.sql"),
        Query::Q2 => include_str!("../../../examples/nexmark/q2.sql"),
        Query::Q3 => include_str!("../../../examples/nexmark/q3.sql"),
        Query::Q4 => include_str!("../../../examples/nexmark/q4.sql"),
        Query::Q5 => include_str!("../../../examples/nexmark/q5.sql"),
        Query::Q7 => include_str!("../../../examples/nexmark/q7.sql"),
        Query::Q8 => include_str!("../../../examples/nexmark/q8.sql"),
        Query::Q11 => include_str!("../../../examples/nexmark/q11.sql"),
    }
}

/// The example with its sink a blackhole and its generator at `opts`' rate.
pub fn benchmark_text(query: Query, opts: &QueryOptions) -> String {
    let delay = opts.watermark_delay.as_millis();
    example(query)
        .replace(
            &format!("'connector' = 'filesystem', 'path' = 'out/{query}', 'format' = 'json'"),
            "'connector' = 'blackhole'",
        )
        .replace(
            "'events' = '10M'",
            &format!("'rate' = '{}'", opts.nexmark.first_event_rate),
        )
        .replace(
            "date_time - INTERVAL '4' SECOND",
            &format!("date_time - INTERVAL '{delay}' MILLISECOND"),
        )
}

/// Plans the SQL version of `query`; returns the graph and the planning time.
///
/// # Errors
/// The example does not plan (a bug in it or in the planner).
pub fn build(query: Query, opts: &QueryOptions) -> Result<(JobGraph, Duration), BenchError> {
    let options = PlanOptions {
        name: format!("nexmark-{query}-sql"),
        parallelism: opts.parallelism,
        max_parallelism: riffle_core::DEFAULT_MAX_PARALLELISM,
        settings: RunSettings {
            nexmark_events: opts.nexmark.events,
            nexmark_throttle: opts.nexmark.max_events_per_second,
        },
    };
    let pipeline = plan_pipeline(
        &benchmark_text(query, opts),
        &options,
        &ConnectorRegistry::default(),
    )
    .map_err(|e| BenchError::Sql(format!("{query}.sql: {e}")))?;
    Ok((pipeline.graph, pipeline.planning_time))
}
