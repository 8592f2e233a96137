//! Parsing a state root URL into an object store and a prefix.

use crate::error::{StateError, StateResult};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::ObjectStore;
use std::path::PathBuf;
use std::sync::Arc;

/// Where checkpoints live.
#[derive(Debug, Clone)]
pub struct StateRoot {
    /// The store.
    pub store: Arc<dyn ObjectStore>,
    /// Prefix inside the store under which pipelines keep their state.
    pub prefix: ObjectPath,
    /// For `file://` roots, the local directory (to fsync what was written).
    pub local_dir: Option<PathBuf>,
    /// The URL as given, for messages.
    pub url: String,
}

impl StateRoot {
    /// Parses `file:///abs/dir`, a plain path (`./riffle-state`), or `memory://`.
    ///
    /// # Errors
    /// An unsupported scheme, or a local directory that cannot be created.
    pub fn parse(url: &str) -> StateResult<Self> {
        let bad = |message: &str| StateError::Root {
            url: url.to_string(),
            message: message.to_string(),
        };
        if url == "memory://" || url.starts_with("memory://") {
            return Ok(Self {
                store: Arc::new(InMemory::new()),
                prefix: ObjectPath::from(url.trim_start_matches("memory://")),
                local_dir: None,
                url: url.to_string(),
            });
        }
        let local = match url.strip_prefix("file://") {
            Some(path) => PathBuf::from(path),
            None if url.contains("://") => {
                return Err(bad(
                    "supported roots are file:///path, a plain directory path, and memory://",
                ))
            }
            None => PathBuf::from(url),
        };
        std::fs::create_dir_all(&local).map_err(|e| StateError::Io {
            path: local.display().to_string(),
            source: e,
        })?;
        let dir = local.canonicalize().map_err(|e| StateError::Io {
            path: local.display().to_string(),
            source: e,
        })?;
        let store = LocalFileSystem::new_with_prefix(&dir).map_err(|e| StateError::Storage {
            path: dir.display().to_string(),
            source: e,
        })?;
        Ok(Self {
            store: Arc::new(store),
            prefix: ObjectPath::from(""),
            local_dir: Some(dir),
            url: url.to_string(),
        })
    }
}
