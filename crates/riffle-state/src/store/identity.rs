//! The identity of a pipeline's state, `_identity.json`: a random id created by the
//! first run on a state root and kept by every run that resumes from it. Sinks record it
//! as the owner of their output (docs/engine.md, "One owner per output").

use super::{now_ms, CheckpointStore};
use crate::error::{StateError, StateResult};
use bytes::Bytes;
use object_store::PutMode;
use serde::{Deserialize, Serialize};

/// What `_identity.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateIdentity {
    /// Random, 128 bits as hex.
    pub id: String,
    /// The pipeline's name when the identity was created.
    pub pipeline: String,
    /// When it was created.
    pub created_at_ms: i64,
}

impl CheckpointStore {
    /// The identity of this pipeline's state, or `None` before any run created it.
    ///
    /// # Errors
    /// Storage failures; a record that is not an identity, named.
    pub async fn identity(&self) -> StateResult<Option<StateIdentity>> {
        let path = self.layout.identity();
        let Some(bytes) = self.get_optional(&path).await? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StateError::Corrupt {
                path: path.to_string(),
                reason: format!("not a state identity: {e}"),
            })
    }

    /// The identity of this pipeline's state, created (by conditional create, so two
    /// runs starting at once agree on one) when there is none yet.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn claim_identity(&self) -> StateResult<StateIdentity> {
        if let Some(identity) = self.identity().await? {
            return Ok(identity);
        }
        let identity = StateIdentity {
            id: uuid::Uuid::new_v4().simple().to_string(),
            pipeline: self
                .layout
                .base()
                .rsplit('/')
                .next()
                .unwrap_or("")
                .to_string(),
            created_at_ms: now_ms(),
        };
        let bytes = Bytes::from(serde_json::to_vec_pretty(&identity).unwrap_or_default());
        match self
            .put(&self.layout.identity(), bytes, PutMode::Create)
            .await
        {
            Ok(()) => Ok(identity),
            Err(StateError::Storage {
                source: object_store::Error::AlreadyExists { .. },
                ..
            }) => self.identity().await?.ok_or_else(|| StateError::Corrupt {
                path: self.layout.identity().to_string(),
                reason: "the identity vanished right after another run created it".into(),
            }),
            Err(e) => Err(e),
        }
    }
}
