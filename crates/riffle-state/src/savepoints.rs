//! Savepoints: self-contained copies of a committed epoch under `savepoints/{label}/`,
//! never garbage-collected.
//!
//! A savepoint's manifest is the epoch's manifest with every file path rewritten into
//! the savepoint's directory and `savepoint` set to its label. Files are copied first
//! (state files of older epochs that the epoch reuses too, so nothing points back into
//! `checkpoints/`), made durable, and the manifest is written last with a conditional
//! create: a label names one savepoint, and a savepoint without a manifest does not
//! exist (it is listed as incomplete and may be deleted).

use crate::error::{StateError, StateResult};
use crate::layout::{check_label, savepoint_dir_name, Layout};
use crate::manifest::{Manifest, ManifestStatus};
use crate::store::CheckpointStore;
use bytes::Bytes;
use object_store::PutMode;

/// What `savepoints/` holds under one label.
// Findings are few (one per epoch or label) and short-lived: boxing buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum SavepointFinding {
    /// A savepoint with a valid manifest.
    Valid(Manifest),
    /// The manifest is damaged; the reason names it.
    Damaged(String),
    /// Files but no manifest: a savepoint that never completed.
    Incomplete,
}

/// `manifest` as the savepoint `label`: paths rewritten into the savepoint's directory,
/// one file name per position in its subtask's list (order matters: later files win),
/// no sink committables (they were committed by the epoch itself; held ones stay, for
/// the run restored from it to publish). Returns the new
/// manifest and the (old path, new path) pairs to copy.
pub fn savepoint_manifest(manifest: &Manifest, label: &str) -> (Manifest, Vec<(String, String)>) {
    let mut savepoint = manifest.clone();
    savepoint.savepoint = Some(label.to_string());
    savepoint.status = ManifestStatus::Committed;
    savepoint.sink_committables.clear();
    let mut copies = Vec::new();
    for op in &mut savepoint.operators {
        for sub in &mut op.subtasks {
            for (part, file) in sub.files.iter_mut().enumerate() {
                let to = Layout::savepoint_file(label, &op.operator, sub.subtask, part);
                copies.push((std::mem::replace(&mut file.path, to.clone()), to));
            }
        }
    }
    (savepoint, copies)
}

fn bad_label(label: &str) -> impl FnOnce(String) -> StateError + '_ {
    move |message| StateError::Savepoint {
        label: label.to_string(),
        message,
    }
}

impl CheckpointStore {
    /// Promotes a committed epoch to the savepoint `label`: copies its files into
    /// `savepoints/{label}/` and writes the savepoint's manifest last.
    ///
    /// # Errors
    /// The label is invalid or taken; storage failures.
    pub async fn promote(&self, manifest: &Manifest, label: &str) -> StateResult<Manifest> {
        self.install_savepoint(self, manifest, label).await
    }

    /// Copies a savepoint or checkpoint `manifest` of `source` (another state root, or
    /// this one) into this store as the savepoint `label`. Files already in place with
    /// their recorded size are not copied again, so an interrupted copy can be retried.
    ///
    /// # Errors
    /// The label is invalid or taken; a source file is missing or damaged (checked
    /// against its recorded size and CRC32C when it crosses stores); storage failures.
    pub async fn install_savepoint(
        &self,
        source: &CheckpointStore,
        manifest: &Manifest,
        label: &str,
    ) -> StateResult<Manifest> {
        check_label(label).map_err(bad_label(label))?;
        if self.read_savepoint(label).await?.is_some() {
            return Err(bad_label(label)(
                "a savepoint of this name exists; choose another label or delete it first".into(),
            ));
        }
        let (savepoint, copies) = savepoint_manifest(manifest, label);
        let same_store = std::ptr::eq(self, source) || self.same_root(source);
        let entries: Vec<_> = savepoint.files().cloned().collect();
        let mut written = Vec::new();
        for ((from, _), entry) in copies.iter().zip(&entries) {
            let to = self.layout().absolute(&entry.path);
            if same_store {
                self.copy_object(&source.layout().absolute(from), &to)
                    .await?;
            } else {
                let bytes = source.read_bytes(from).await?;
                let mut original = entry.clone();
                original.path = from.clone();
                crate::state_file::check_bytes(&original, &bytes)?;
                self.put_unsynced(&to, bytes, PutMode::Overwrite).await?;
            }
            written.push(to);
        }
        self.sync(&written).await?;
        self.write_savepoint_manifest(&savepoint).await?;
        Ok(savepoint)
    }

    /// Writes a savepoint's manifest (the commit point of a savepoint) with a
    /// conditional create.
    ///
    /// # Errors
    /// The manifest is invalid or the label taken; storage failures.
    pub async fn write_savepoint_manifest(&self, manifest: &Manifest) -> StateResult<()> {
        let label = manifest.savepoint.clone().unwrap_or_default();
        manifest.validate().map_err(bad_label(&label))?;
        let path = self.layout().savepoint_manifest(&label);
        let bytes = Bytes::from(serde_json::to_vec_pretty(manifest).unwrap_or_default());
        match self.put_unsynced(&path, bytes, PutMode::Create).await {
            Err(StateError::Storage {
                source: object_store::Error::AlreadyExists { .. },
                ..
            }) => return Err(bad_label(&label)("a savepoint of this name exists".into())),
            other => other?,
        }
        self.sync(std::slice::from_ref(&path)).await
    }

    /// Reads and validates the manifest of savepoint `label`; `Ok(None)` when there is
    /// none.
    ///
    /// # Errors
    /// [`StateError::Corrupt`] naming the manifest; storage failures.
    pub async fn read_savepoint(&self, label: &str) -> StateResult<Option<Manifest>> {
        check_label(label).map_err(bad_label(label))?;
        let path = self.layout().savepoint_manifest(label);
        self.read_manifest_at(&path, "savepoint manifest", |m| {
            (m.savepoint.as_deref() == Some(label))
                .then_some(())
                .ok_or_else(|| {
                    format!(
                        "the manifest names savepoint {:?}, it is stored as `{label}`",
                        m.savepoint
                    )
                })
        })
        .await
    }

    /// Every label under `savepoints/`, sorted, with what it holds.
    ///
    /// # Errors
    /// Storage failures other than damage.
    pub async fn savepoints(&self) -> StateResult<Vec<(String, SavepointFinding)>> {
        let dir = self.layout().savepoints();
        let listing = self
            .store()
            .list_with_delimiter(Some(&dir))
            .await
            .map_err(|e| StateError::Storage {
                path: dir.to_string(),
                source: e,
            })?;
        let mut labels: Vec<String> = listing
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .filter(|l| check_label(l).is_ok())
            .collect();
        labels.sort();
        let mut out = Vec::new();
        for label in labels {
            let finding = match self.read_savepoint(&label).await {
                Ok(Some(m)) => SavepointFinding::Valid(m),
                Ok(None) => SavepointFinding::Incomplete,
                Err(e @ StateError::Corrupt { .. }) => SavepointFinding::Damaged(e.to_string()),
                Err(e) => return Err(e),
            };
            out.push((label, finding));
        }
        Ok(out)
    }

    /// Deletes savepoint `label`, manifest first (so a crash leaves an incomplete
    /// savepoint, never a manifest without files). Refused while a checkpoint manifest
    /// in `checkpoints/` references one of its files (a run started from it and has
    /// not yet written a checkpoint of its own that replaces them).
    ///
    /// # Errors
    /// No such savepoint, or still referenced; storage failures.
    pub async fn delete_savepoint(&self, label: &str) -> StateResult<usize> {
        check_label(label).map_err(bad_label(label))?;
        let prefix = format!("{}/", savepoint_dir_name(label));
        let findings = self.findings(false).await?;
        let users: Vec<String> = findings
            .iter()
            .filter_map(|(epoch, f)| match f {
                crate::recovery::EpochFinding::Valid(m)
                    if m.file_paths().any(|p| p.starts_with(&prefix)) =>
                {
                    Some(epoch.to_string())
                }
                _ => None,
            })
            .collect();
        if !users.is_empty() {
            return Err(bad_label(label)(format!(
                "checkpoint epoch(s) {} still read its state (a run restored from it); it can be deleted once that run has taken {} newer checkpoint(s)",
                users.join(", "),
                users.len()
            )));
        }
        let mut paths = self.list_under(&self.layout().savepoint_dir(label)).await?;
        if paths.is_empty() {
            return Err(bad_label(label)(
                "no such savepoint; `riffle savepoint list` shows what exists".into(),
            ));
        }
        let manifest = self.layout().savepoint_manifest(label);
        paths.sort_by_key(|p| *p != manifest);
        let count = paths.len();
        self.delete_paths(&paths).await?;
        self.remove_local_dir(&self.layout().savepoint_dir(label))?;
        Ok(count)
    }

    /// Every file path (relative, as manifests record them) under savepoint `label`.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn savepoint_files(&self, label: &str) -> StateResult<Vec<String>> {
        let mut files: Vec<String> = self
            .list_under(&self.layout().savepoint_dir(label))
            .await?
            .iter()
            .map(|p| self.layout().relative(p))
            .collect();
        files.sort();
        Ok(files)
    }
}
