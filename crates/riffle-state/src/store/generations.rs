//! Generation claims: which run of a pipeline may change its state (docs/engine.md,
//! "Fencing").

use super::{now_ms, CheckpointStore};
use crate::error::{StateError, StateResult};
use crate::layout::parse_generation_claim;
use bytes::Bytes;
use object_store::PutMode;
use riffle_core::Epoch;
use serde::Deserialize;

impl CheckpointStore {
    /// Claims a generation for a new run: the lowest one at least `at_least` and past
    /// every existing claim, created with a conditional create, so that of two processes
    /// starting at once exactly one wins each number (the other takes the next). Runs of
    /// older generations may no longer commit (docs/engine.md, "Fencing").
    ///
    /// # Errors
    /// Storage failures, or a store that keeps refusing (more than 64 lost races).
    pub async fn claim_generation(&self, at_least: u64) -> StateResult<u64> {
        let first = self.next_generation(at_least).await?;
        self.claim_generation_from(first).await
    }

    /// The generation a new run would try first: past every claim, at least `at_least`.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn next_generation(&self, at_least: u64) -> StateResult<u64> {
        Ok(self
            .newest_generation()
            .await?
            .map_or(1, |g| g + 1)
            .max(at_least))
    }

    /// Claims `first`, or the next number another process has not claimed yet, by
    /// conditional create (see [`claim_generation`](Self::claim_generation)).
    ///
    /// # Errors
    /// Storage failures, or more than 64 lost races.
    pub async fn claim_generation_from(&self, first: u64) -> StateResult<u64> {
        let mut generation = first;
        for _ in 0..64 {
            let path = self.layout.generation_claim(generation);
            let record = Bytes::from(format!(
                "{{\"generation\":{generation},\"pid\":{},\"claimed_at_ms\":{}}}",
                std::process::id(),
                now_ms()
            ));
            match self.put(&path, record, PutMode::Create).await {
                Ok(()) => return Ok(generation),
                Err(StateError::Storage {
                    source: object_store::Error::AlreadyExists { .. },
                    ..
                }) => generation += 1,
                Err(e) => return Err(e),
            }
        }
        Err(StateError::Storage {
            path: self.layout.generation_claims().to_string(),
            source: object_store::Error::Generic {
                store: "riffle",
                source: "lost the race for a generation 64 times in a row".into(),
            },
        })
    }

    /// The newest generation claimed (or recorded by an older version's
    /// `_generation.json`), or `None` before any run claimed one.
    ///
    /// # Errors
    /// Storage failures; a damaged legacy record, named.
    pub async fn newest_generation(&self) -> StateResult<Option<u64>> {
        let claims = self.layout.generation_claims();
        let claimed = self
            .list_under(&claims)
            .await?
            .iter()
            .filter_map(|p| p.filename().and_then(parse_generation_claim))
            .max();
        Ok(claimed.max(self.read_legacy_generation().await?))
    }

    async fn read_legacy_generation(&self) -> StateResult<Option<u64>> {
        #[derive(Deserialize)]
        struct Generation {
            generation: u64,
        }
        let path = self.layout.legacy_generation();
        let Some(bytes) = self.get_optional(&path).await? else {
            return Ok(None);
        };
        serde_json::from_slice::<Generation>(&bytes)
            .map(|g| Some(g.generation))
            .map_err(|e| StateError::Corrupt {
                path: path.to_string(),
                reason: format!("not a generation record: {e}"),
            })
    }

    /// Fails with [`StateError::StaleGeneration`] when a run newer than `generation`
    /// has claimed the pipeline; called right before every irreversible step.
    ///
    /// # Errors
    /// Fenced, or storage failures.
    pub async fn check_generation(&self, generation: u64, epoch: Epoch) -> StateResult<()> {
        match self.newest_generation().await? {
            Some(current) if current > generation => Err(StateError::StaleGeneration {
                generation,
                current,
                epoch,
            }),
            _ => Ok(()),
        }
    }
}
