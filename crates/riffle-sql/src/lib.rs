//! riffle-sql: pipelines written in SQL.
//!
//! ```text
//!   pipeline.sql ─▶ script (tokens; WATERMARK FOR lifted out) ─▶ statements
//!     CREATE TABLE … WITH ('connector' = …)  ─▶ connectors (registry) ─▶ source / sink
//!     CREATE VIEW v AS …                     ─▶ DataFusion view
//!     INSERT INTO sink SELECT …              ─▶ DataFusion plan + optimizer
//!                                            ─▶ translate ─▶ riffle JobGraph
//! ```
//!
//! DataFusion parses, resolves and optimizes; the translator maps the logical plan onto
//! riffle's streaming operators, and expressions run as DataFusion physical expressions
//! inside them. Windows are Arroyo-style functions in `GROUP BY` (see [`windows`]).

mod case_lookup;
pub mod connectors;
pub mod ddl;
mod decimal_text;
pub mod error;
mod functions;
mod grouping_sets;
mod partition_clause;
mod pipeline;
pub mod script;
mod shared_work;
mod sink_attach;
mod time_bounds;
mod translate;
mod tvf;
mod unrun_syntax;
pub mod windows;

pub use connectors::{
    Connector, ConnectorRegistry, OptionSpec, RunSettings, SinkTable, SourceTable,
};
pub use error::{Location, Result, SqlError};
pub use pipeline::{plan_pipeline, PlanOptions, SqlPipeline};
