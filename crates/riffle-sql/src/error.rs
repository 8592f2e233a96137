//! Errors of SQL planning, each with where in the file it happened and, when there is
//! one, what to write instead.

use std::fmt;

/// A position in the pipeline file (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// Line, from 1.
    pub line: u64,
    /// Column, from 1.
    pub column: u64,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// Result with [`SqlError`].
pub type Result<T, E = SqlError> = std::result::Result<T, E>;

/// Why a pipeline file cannot be planned.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The text does not parse.
    #[error("syntax error at {at}: {message}")]
    Syntax { at: Location, message: String },

    /// The statement parses but cannot become a pipeline.
    #[error("{}{message}{}", at.map(|l| format!("{l}: ")).unwrap_or_default(), hint.as_ref().map(|h| format!("\n  hint: {h}")).unwrap_or_default())]
    Plan {
        at: Option<Location>,
        message: String,
        hint: Option<String>,
    },

    /// A connector option is missing or wrong.
    #[error("table `{table}`: {message}")]
    Connector { table: String, message: String },

    /// The dataflow built from the plan was refused by the engine.
    #[error("building the dataflow: {0}")]
    Dataflow(String),
}

impl SqlError {
    /// A planning error without a hint.
    pub fn plan(message: impl Into<String>) -> Self {
        SqlError::Plan {
            at: None,
            message: message.into(),
            hint: None,
        }
    }

    /// A construct riffle does not run, with what to write instead.
    pub fn unsupported(what: impl Into<String>, hint: impl Into<String>) -> Self {
        SqlError::Plan {
            at: None,
            message: format!("{} is not supported on a stream", what.into()),
            hint: Some(hint.into()),
        }
    }

    /// A connector error for `table`.
    pub fn connector(table: &str, message: impl Into<String>) -> Self {
        SqlError::Connector {
            table: table.into(),
            message: message.into(),
        }
    }

    /// Adds `at` to a planning error that has no location yet.
    pub fn located(self, location: Option<Location>) -> Self {
        match self {
            SqlError::Plan {
                at: None,
                message,
                hint,
            } => SqlError::Plan {
                at: location,
                message,
                hint,
            },
            other => other,
        }
    }
}

impl From<riffle_core::Error> for SqlError {
    fn from(e: riffle_core::Error) -> Self {
        SqlError::plan(e.to_string())
    }
}

impl From<datafusion::arrow::error::ArrowError> for SqlError {
    fn from(e: datafusion::arrow::error::ArrowError) -> Self {
        SqlError::plan(e.to_string())
    }
}

impl From<riffle_runtime::RuntimeError> for SqlError {
    fn from(e: riffle_runtime::RuntimeError) -> Self {
        SqlError::Dataflow(e.to_string())
    }
}

impl From<datafusion_common::DataFusionError> for SqlError {
    fn from(e: datafusion_common::DataFusionError) -> Self {
        let at = e.diagnostic().and_then(|d| d.span).map(|s| Location {
            line: s.start.line,
            column: s.start.column,
        });
        // DataFusion prefixes its own layer ("Error during planning: …"); keep the message.
        SqlError::Plan {
            at,
            message: e.strip_backtrace(),
            hint: None,
        }
    }
}
