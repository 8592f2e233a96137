//! riffle-bench: the Nexmark queries and the peer job as riffle pipelines (Rust API),
//! and the harness that runs and times them for `riffle bench`.
//!
//! ```text
//!   Query + QueryOptions ──build──▶ JobGraph ──riffle-runtime──▶ JobSummary
//!                                                    │
//!                          harness: wall time, CPU time, peak RSS ──▶ BenchRow table
//! ```

pub mod changelog_queries;
pub mod error;
pub mod flink_suite;
pub mod harness;
pub mod kafka_baseline;
pub mod peer;
pub mod queries;
pub mod restart;
pub mod sinks;
pub mod sql_queries;

pub use error::BenchError;
pub use harness::{BenchRow, Measured};
pub use peer::PeerJob;
pub use queries::{Query, QueryOptions};
