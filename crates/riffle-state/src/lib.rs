//! riffle-state: checkpoints on object storage.
//!
//! ```text
//!  {state_root}/{pipeline}/
//!    _latest.json                         hint: newest committed epoch
//!    checkpoints/epoch=000042/
//!      _manifest.json                     commit point (written last, conditional create)
//!      {operator}/{subtask:03}-{part}.parquet   typed state, CRC32C in the manifest
//!    savepoints/{label}/                  self-contained copies, never collected
//! ```
//!
//! [`CheckpointStore`] does the I/O (any `object_store`: `file://`, `memory://`);
//! [`recovery`] holds the decisions — which checkpoint to restore, what GC may delete —
//! as pure functions over manifests, with no storage calls.

pub mod archive;
pub mod counting;
pub mod error;
pub mod layout;
pub mod manifest;
pub mod recovery;
pub mod root;
pub mod savepoints;
pub mod state_file;
pub mod store;
pub mod tables;

pub use counting::{RequestCounts, RequestTally};
pub use error::{StateError, StateResult};
pub use manifest::{FileEntry, Manifest, ManifestStatus, OperatorEntry, FORMAT_VERSION};
pub use root::StateRoot;
pub use store::{CheckpointStore, StateIdentity, WrittenFiles, STREAMED_PART_BYTES};
