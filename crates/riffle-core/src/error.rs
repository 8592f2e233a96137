//! The error type shared by operators, sources and sinks.

use datafusion_common::arrow::error::ArrowError;
use datafusion_common::DataFusionError;
use std::path::PathBuf;

/// Result with riffle-core's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, with enough context for the user to act on it.
///
/// Variants are grouped by whose fault it is: the user's (`Config`, `Plan`,
/// `MalformedRecord`), the outside world's (`Io`), or ours (`Arrow`, `DataFusion`,
/// `Internal`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration value is wrong; `field` names the option.
    #[error("invalid configuration for `{field}`: {message}")]
    Config { field: String, message: String },

    /// A pipeline cannot be built as described (unknown column, wrong type, …).
    #[error("cannot build pipeline: {0}")]
    Plan(String),

    /// A source record could not be decoded.
    #[error("malformed record in {file}, line {line}{}: {message}", field.as_ref().map(|f| format!(", field `{f}`")).unwrap_or_default())]
    MalformedRecord {
        file: PathBuf,
        line: u64,
        field: Option<String>,
        message: String,
    },

    /// A message from an external system (e.g. a Kafka record) could not be decoded;
    /// `location` names it (topic, partition, offset).
    #[error("malformed record at {location}{}: {message}", field.as_ref().map(|f| format!(", field `{f}`")).unwrap_or_default())]
    MalformedMessage {
        location: String,
        field: Option<String>,
        message: String,
    },

    /// An external system (PostgreSQL, Kafka) failed or refused a request.
    #[error("{system}: {message}")]
    External { system: String, message: String },

    /// A file or directory could not be read or written.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// An Arrow kernel failed.
    #[error(transparent)]
    Arrow(#[from] ArrowError),

    /// A DataFusion expression failed to plan or evaluate.
    #[error(transparent)]
    DataFusion(#[from] DataFusionError),

    /// A Parquet file could not be read or written.
    #[error(transparent)]
    Parquet(#[from] parquet::errors::ParquetError),

    /// An operator's state batch does not have the shape the operator wrote.
    #[error("state of operator `{operator}` cannot be restored: {message}")]
    State { operator: String, message: String },

    /// The local spill tier of an operator's state failed (a full disk, a damaged
    /// file): the job restarts from its last checkpoint, which the tier never replaces.
    #[error("the state spill tier failed: {0}")]
    Spill(String),

    /// A failure injected by a test (fault injection), never produced in normal runs.
    #[error("injected failure: {0}")]
    Injected(String),
}

impl Error {
    /// Wraps an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// A configuration error for option `field`.
    pub fn config(field: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Config {
            field: field.into(),
            message: message.into(),
        }
    }

    /// A failure of external system `system` (e.g. `PostgreSQL at 127.0.0.1:5432`).
    pub fn external(system: impl Into<String>, message: impl std::fmt::Display) -> Self {
        Error::External {
            system: system.into(),
            message: message.to_string(),
        }
    }

    /// A planning error.
    pub fn plan(message: impl Into<String>) -> Self {
        Error::Plan(message.into())
    }
}
