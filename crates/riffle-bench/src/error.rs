//! Errors of building or running a benchmark pipeline.

/// Why a query could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// An operator or source could not be planned.
    #[error(transparent)]
    Plan(#[from] riffle_core::Error),
    /// The graph could not be built or the job failed.
    #[error(transparent)]
    Runtime(#[from] riffle_runtime::RuntimeError),
    /// A SQL example did not plan.
    #[error("{0}")]
    Sql(String),
    /// The Kafka broker of a connector benchmark failed.
    #[error("Kafka: {0}")]
    Kafka(String),
    /// An unknown query or job name.
    #[error("unknown {kind} `{name}`; choose one of: {choices}")]
    Unknown {
        /// What was named (query, job).
        kind: &'static str,
        /// The name given.
        name: String,
        /// The valid names.
        choices: String,
    },
}
