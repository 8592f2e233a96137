//! Errors of the checkpoint store.

use riffle_core::Epoch;

/// Result with [`StateError`].
pub type StateResult<T> = std::result::Result<T, StateError>;

/// What went wrong reading or writing checkpoints.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The state root URL is not one riffle understands.
    #[error("invalid state root `{url}`: {message}")]
    Root { url: String, message: String },

    /// The storage could not be reached or refused an operation; retrying may help.
    #[error("storage error at {path}: {source}")]
    Storage {
        path: String,
        #[source]
        source: object_store::Error,
    },

    /// A file exists but does not hold what the manifest says (size, CRC, format).
    #[error("damaged checkpoint file {path}: {reason}")]
    Corrupt { path: String, reason: String },

    /// A manifest for this epoch already exists (conditional create lost).
    #[error("a manifest for epoch {epoch} already exists at {path}")]
    ManifestExists { epoch: Epoch, path: String },

    /// A process of an older generation tried to commit.
    #[error("generation {generation} may not commit epoch {epoch}: generation {current} owns the pipeline now")]
    StaleGeneration {
        generation: u64,
        current: u64,
        epoch: Epoch,
    },

    /// A savepoint request or command that cannot be carried out as asked (a label in
    /// use, a label that cannot name a directory, a savepoint that does not exist or that
    /// a retained checkpoint still reads).
    #[error("savepoint `{label}`: {message}")]
    Savepoint { label: String, message: String },

    /// A savepoint archive that cannot be imported; nothing of it was kept.
    #[error("savepoint archive {archive}: {reason}")]
    Archive { archive: String, reason: String },

    /// Encoding state as Parquet failed.
    #[error("cannot encode state of `{operator}`: {source}")]
    Encode {
        operator: String,
        #[source]
        source: riffle_core::parquet::errors::ParquetError,
    },

    /// Reading the rows of a streamed state part, to write them, failed.
    #[error("cannot read state of `{operator}` to write it: {source}")]
    Read {
        operator: String,
        #[source]
        source: riffle_core::Error,
    },

    /// A snapshot names state batches its operator no longer holds, which no file of
    /// the epoch it may reference holds: the epoch fails (the operator writes its state
    /// whole at the next one) rather than write them empty.
    #[error("state of `{operator}` subtask {subtask} names {batches} batch(es) of an earlier checkpoint that this checkpoint may not reference")]
    NotHeld {
        operator: String,
        subtask: usize,
        batches: usize,
    },

    /// Local file I/O (fsync) failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}
