//! Epochs and their manifests: the commit decision (PREPARED), the COMMITTED marker,
//! the `_latest.json` hint, reading and verifying manifests, what recovery finds in each
//! epoch directory, and deleting an epoch (docs/state-format.md).

use super::{now_ms, storage, CheckpointStore, LatestHint};
use crate::error::{StateError, StateResult};
use crate::layout::parse_epoch_dir;
use crate::manifest::{Manifest, ManifestStatus};
use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt, PutMode};
use riffle_core::Epoch;

impl CheckpointStore {
    fn encode_manifest(manifest: &Manifest) -> Bytes {
        // Serializing plain data with string keys cannot fail.
        Bytes::from(serde_json::to_vec_pretty(manifest).unwrap_or_default())
    }

    /// Writes `manifest` (status PREPARED) with a conditional create: the logged commit
    /// decision. Exactly one writer wins an epoch.
    ///
    /// # Errors
    /// [`StateError::ManifestExists`] when the epoch already has a manifest.
    ///
    /// # Panics
    /// If the manifest is invalid or not PREPARED: the coordinator built it, so that is a bug.
    pub async fn prepare(&self, manifest: &Manifest) -> StateResult<()> {
        assert_eq!(
            manifest.status,
            ManifestStatus::Prepared,
            "prepare takes a PREPARED manifest"
        );
        if let Err(problem) = manifest.validate() {
            panic!(
                "refusing to write an invalid manifest for epoch {}: {problem}",
                manifest.epoch
            );
        }
        let path = self.layout.manifest(manifest.epoch);
        match self
            .put(&path, Self::encode_manifest(manifest), PutMode::Create)
            .await
        {
            Err(StateError::Storage {
                source: object_store::Error::AlreadyExists { .. },
                ..
            }) => Err(StateError::ManifestExists {
                epoch: manifest.epoch,
                path: path.to_string(),
            }),
            other => other,
        }
    }

    /// Marks the epoch COMMITTED: creates `_committed.json` beside its manifest with a
    /// conditional create. Idempotent (a marker already there is the same decision).
    ///
    /// The manifest itself is never rewritten: a run of an older generation paused
    /// after its last check would otherwise rewrite it after a newer run had rolled the
    /// epoch forward and garbage-collected it, bringing back a COMMITTED manifest whose
    /// files are gone. A marker it creates in a collected epoch stands alone, without a
    /// manifest, and is swept like any partial epoch (docs/engine.md, "Fencing").
    ///
    /// # Errors
    /// Storage failures.
    pub async fn commit(&self, manifest: &Manifest) -> StateResult<()> {
        let path = self.layout.committed_marker(manifest.epoch);
        let marker = format!(
            "{{\"epoch\":{},\"generation\":{},\"committed_at_ms\":{}}}",
            manifest.epoch.0,
            manifest.generation,
            now_ms()
        );
        match self.put(&path, Bytes::from(marker), PutMode::Create).await {
            Ok(())
            | Err(StateError::Storage {
                source: object_store::Error::AlreadyExists { .. },
                ..
            }) => {
                self.remember_committed(manifest.epoch, true);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Points `_latest.json` at `epoch` (a hint; recovery lists epochs itself).
    ///
    /// # Errors
    /// Storage failures.
    pub async fn flip_latest(&self, epoch: Epoch) -> StateResult<()> {
        let bytes = Bytes::from(serde_json::to_vec(&LatestHint { epoch }).unwrap_or_default());
        self.put(&self.layout.latest(), bytes, PutMode::Overwrite)
            .await
    }

    /// Reads the `_latest.json` hint; `None` when missing or unreadable (it is only a hint).
    pub async fn latest_hint(&self) -> Option<Epoch> {
        let got = self.store().get(&self.layout.latest()).await.ok()?;
        let bytes = got.bytes().await.ok()?;
        serde_json::from_slice::<LatestHint>(&bytes)
            .ok()
            .map(|h| h.epoch)
    }

    /// Every epoch directory under `checkpoints/`, ascending (with or without manifest).
    ///
    /// # Errors
    /// Storage failures.
    pub async fn list_epochs(&self) -> StateResult<Vec<Epoch>> {
        let dir = self.layout.checkpoints();
        let listing = self
            .store()
            .list_with_delimiter(Some(&dir))
            .await
            .map_err(storage(&dir))?;
        let mut epochs: Vec<Epoch> = listing
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().and_then(parse_epoch_dir))
            .collect();
        epochs.sort();
        Ok(epochs)
    }

    /// Reads and validates the manifest of `epoch`; `Ok(None)` when there is none.
    ///
    /// # Errors
    /// [`StateError::Corrupt`] naming the manifest when it is not valid JSON or breaks an
    /// invariant; storage failures.
    pub async fn read_manifest(&self, epoch: Epoch) -> StateResult<Option<Manifest>> {
        let path = self.layout.manifest(epoch);
        let manifest = self
            .read_manifest_at(&path, "manifest", |m| {
                (m.epoch == epoch).then_some(()).ok_or_else(|| {
                    format!(
                        "manifest says epoch {}, stored under epoch {epoch}",
                        m.epoch
                    )
                })
            })
            .await?;
        // COMMITTED is the marker beside the manifest (state roots written before the
        // marker existed have it in the manifest).
        match manifest {
            Some(mut m) if m.status == ManifestStatus::Prepared => {
                let marker = self.layout.committed_marker(epoch);
                if self.knows_committed(epoch) || self.get_optional(&marker).await?.is_some() {
                    self.remember_committed(epoch, true);
                    m.status = ManifestStatus::Committed;
                }
                Ok(Some(m))
            }
            other => Ok(other),
        }
    }

    fn knows_committed(&self, epoch: Epoch) -> bool {
        self.committed
            .lock()
            .map(|known| known.contains(&epoch))
            .unwrap_or(false)
    }

    /// Records that `epoch`'s marker exists (or, deleting the epoch, no longer does).
    fn remember_committed(&self, epoch: Epoch, committed: bool) {
        if let Ok(mut known) = self.committed.lock() {
            if committed {
                known.insert(epoch);
            } else {
                known.remove(&epoch);
            }
        }
    }

    /// Reads, parses and validates the manifest at `path` (`kind` names it in errors),
    /// then checks it `belongs` where it is stored; `Ok(None)` when there is none.
    ///
    /// # Errors
    /// [`StateError::Corrupt`] naming the manifest; storage failures.
    pub(crate) async fn read_manifest_at(
        &self,
        path: &ObjectPath,
        kind: &str,
        belongs: impl FnOnce(&Manifest) -> Result<(), String>,
    ) -> StateResult<Option<Manifest>> {
        let Some(bytes) = self.get_optional(path).await? else {
            return Ok(None);
        };
        let corrupt = |reason: String| StateError::Corrupt {
            path: path.to_string(),
            reason,
        };
        let manifest: Manifest = serde_json::from_slice(&bytes)
            .map_err(|e| corrupt(format!("not a valid {kind}: {e}")))?;
        manifest.validate().map_err(corrupt)?;
        belongs(&manifest).map_err(corrupt)?;
        Ok(Some(manifest))
    }

    /// Checks that every file `manifest` references exists with its size and CRC32C and
    /// decodes as Parquet; returns the first problem.
    ///
    /// # Errors
    /// The first damaged file.
    pub async fn verify(&self, manifest: &Manifest) -> StateResult<()> {
        for entry in manifest.files() {
            self.read_state(entry).await?;
        }
        Ok(())
    }

    /// What every epoch directory holds: a valid manifest (its files verified when
    /// `verify`), a damaged one (with the reason, naming the file), or none (partial).
    ///
    /// # Errors
    /// Storage failures other than damage.
    pub async fn findings(
        &self,
        verify: bool,
    ) -> StateResult<Vec<(Epoch, crate::recovery::EpochFinding)>> {
        use crate::recovery::EpochFinding;
        let mut findings = Vec::new();
        for epoch in self.list_epochs().await? {
            let finding = match self.read_manifest(epoch).await {
                Ok(Some(m)) if verify => match self.verify(&m).await {
                    Ok(()) => EpochFinding::Valid(m),
                    Err(e @ StateError::Corrupt { .. }) => EpochFinding::Damaged(e.to_string()),
                    Err(e) => return Err(e),
                },
                Ok(Some(m)) => EpochFinding::Valid(m),
                Ok(None) => EpochFinding::Partial,
                Err(e @ StateError::Corrupt { .. }) => EpochFinding::Damaged(e.to_string()),
                Err(e) => return Err(e),
            };
            findings.push((epoch, finding));
        }
        Ok(findings)
    }

    /// Every object in `epoch`'s directory, as paths relative to the pipeline root (the
    /// form manifests use), sorted.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn epoch_files(&self, epoch: Epoch) -> StateResult<Vec<String>> {
        let mut files: Vec<String> = self
            .list_epoch(epoch)
            .await?
            .iter()
            .map(|p| self.layout.relative(p))
            .collect();
        files.sort();
        Ok(files)
    }

    /// Every object under `epoch`'s directory.
    async fn list_epoch(&self, epoch: Epoch) -> StateResult<Vec<ObjectPath>> {
        self.list_under(&self.layout.epoch_dir(epoch)).await
    }

    /// Deletes an epoch's directory (GC and sweeping partial epochs) except the files in
    /// `keep` — files that a retained manifest of a later epoch still references
    /// (incremental checkpoints reuse unchanged state files).
    ///
    /// # Errors
    /// Storage failures.
    pub async fn delete_epoch(
        &self,
        epoch: Epoch,
        keep: &std::collections::HashSet<String>,
    ) -> StateResult<()> {
        self.remember_committed(epoch, false);
        let dir = self.layout.epoch_dir(epoch);
        // The manifest goes first, so a crash mid-delete leaves a partial epoch, never a
        // manifest pointing at deleted files.
        let manifest = self.layout.manifest(epoch);
        let mut paths: Vec<ObjectPath> = self
            .list_epoch(epoch)
            .await?
            .into_iter()
            .filter(|p| !keep.contains(&self.layout.relative(p)))
            .collect();
        paths.sort_by_key(|p| *p != manifest);
        self.delete_paths(&paths).await?;
        if crate::recovery::kept_in_epoch(keep, epoch) > 0 {
            return Ok(()); // the directory still holds files in use
        }
        self.remove_local_dir(&dir)
    }
}
