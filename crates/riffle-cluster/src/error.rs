//! Errors of the cluster layer.

use riffle_core::arrow::error::ArrowError;

/// What went wrong between workers.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// Arrow IPC could not encode or decode a batch or schema.
    #[error("Arrow IPC: {0}")]
    Encode(#[source] ArrowError),
    /// A control message was not the JSON expected.
    #[error("control message: {0}")]
    Json(#[source] serde_json::Error),
    /// The peer broke the stream protocol.
    #[error("protocol: {0}")]
    Protocol(String),
    /// Something riffle does not run across workers yet.
    #[error("{0}")]
    Unsupported(String),
    /// A worker's address could not be reached or served.
    #[error("worker {address}: {message}")]
    Connect {
        /// The worker's address.
        address: String,
        /// Why.
        message: String,
    },
    /// A call to another worker failed.
    #[error("worker call: {0}")]
    Status(#[from] tonic::Status),
    /// The job itself failed.
    #[error(transparent)]
    Runtime(#[from] riffle_runtime::RuntimeError),
    /// Reading the checkpoint store failed.
    #[error("state: {0}")]
    State(#[from] riffle_state::StateError),
}

/// Result of the cluster layer.
pub type ClusterResult<T> = std::result::Result<T, ClusterError>;
