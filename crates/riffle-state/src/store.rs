//! Reading and writing one pipeline's checkpoints on an object store.

mod epochs;
mod generations;
mod identity;

pub use identity::StateIdentity;

use crate::error::{StateError, StateResult};
use crate::layout::Layout;
use crate::manifest::FileEntry;
use crate::root::StateRoot;
use crate::state_file::{self, encode_streamed, file_plan, EncodedFile, FilePlan};
use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use riffle_core::{Epoch, OperatorState, RecordBatch};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The `_latest.json` hint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatestHint {
    /// Newest committed epoch when it was written.
    pub epoch: Epoch,
}

/// A pipeline's checkpoints under a state root.
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    root: StateRoot,
    layout: Layout,
    /// Epochs whose COMMITTED marker this store has seen or written: a marker stays
    /// until its epoch is deleted, so reading a manifest of such an epoch needs no
    /// second request for the marker (GC reads every retained manifest each epoch).
    committed: Arc<std::sync::Mutex<std::collections::BTreeSet<Epoch>>>,
    /// About how large a file of a streamed state part grows ([`STREAMED_PART_BYTES`]).
    part_bytes: usize,
}

/// About how large a file of a streamed state part grows before the next begins: the
/// writer holds at most three such files at a time (one being encoded, one queued, one
/// on its way to storage).
pub const STREAMED_PART_BYTES: usize = 64 << 20;

/// The files a snapshot's batches went to, in the manifest's order: one file of held
/// batches, or the files of one streamed part (none if it had no rows).
#[derive(Debug, Clone)]
pub struct WrittenFiles {
    /// The files.
    pub files: Vec<FileEntry>,
    /// Positions in the snapshot's `batches` of the batches they hold.
    pub batches: Vec<usize>,
}

fn storage(path: &ObjectPath) -> impl FnOnce(object_store::Error) -> StateError + '_ {
    move |source| StateError::Storage {
        path: path.to_string(),
        source,
    }
}

impl CheckpointStore {
    /// The checkpoints of `pipeline` under `root`.
    pub fn new(root: StateRoot, pipeline: &str) -> Self {
        let layout = Layout::new(&root.prefix, pipeline);
        Self {
            root,
            layout,
            committed: Arc::default(),
            part_bytes: STREAMED_PART_BYTES,
        }
    }

    /// This store writing the files of a streamed state part at about `bytes` each
    /// (tests make them small, to see a part split).
    #[must_use]
    pub fn with_streamed_part_bytes(mut self, bytes: usize) -> Self {
        self.part_bytes = bytes.max(1);
        self
    }

    /// The paths this store uses.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// This store with every request counted into `counts` (what a checkpoint costs
    /// on object storage); other handles on the same root are not counted.
    pub fn counted(&self, counts: Arc<crate::RequestCounts>) -> Self {
        let wrap = |store: &Arc<dyn ObjectStore>| -> Arc<dyn ObjectStore> {
            Arc::new(crate::counting::CountingStore::new(
                store.clone(),
                counts.clone(),
            ))
        };
        let mut counted = self.clone();
        counted.root.store = wrap(&self.root.store);
        counted.root.bulk = wrap(&self.root.bulk);
        counted
    }

    /// The object store under the state root.
    pub(crate) fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.root.store
    }

    /// The state root's URL, as given.
    pub fn root_url(&self) -> &str {
        &self.root.url
    }

    /// Whether `other` lives in the same object store (objects can be copied in place).
    pub fn same_root(&self, other: &CheckpointStore) -> bool {
        Arc::ptr_eq(&self.root.store, &other.root.store)
            || (self.root.local_dir.is_some() && self.root.local_dir == other.root.local_dir)
    }

    /// An object's bytes, or `None` when it does not exist.
    pub(crate) async fn get_optional(&self, path: &ObjectPath) -> StateResult<Option<Bytes>> {
        Self::get_from(self.store(), path).await
    }

    async fn get_from(
        store: &Arc<dyn ObjectStore>,
        path: &ObjectPath,
    ) -> StateResult<Option<Bytes>> {
        let got = match store.get(path).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(storage(path)(e)),
        };
        got.bytes().await.map(Some).map_err(storage(path))
    }

    /// The bytes of a file given relative to the pipeline's base (as manifests record
    /// it).
    ///
    /// # Errors
    /// [`StateError::Corrupt`] when it is missing; storage failures.
    pub async fn read_bytes(&self, relative: &str) -> StateResult<Bytes> {
        Self::get_from(&self.root.bulk, &self.layout.absolute(relative))
            .await?
            .ok_or_else(|| StateError::Corrupt {
                path: relative.to_string(),
                reason: "missing, but the manifest references it".into(),
            })
    }

    /// Writes a file given relative to the pipeline's base, without syncing.
    pub(crate) async fn write_relative(&self, relative: &str, bytes: Bytes) -> StateResult<()> {
        let path = self.layout.absolute(relative);
        Self::put_to(&self.root.bulk, &path, bytes, PutMode::Overwrite).await
    }

    /// Every object under `dir`.
    pub(crate) async fn list_under(&self, dir: &ObjectPath) -> StateResult<Vec<ObjectPath>> {
        use futures::TryStreamExt;
        let objects: Vec<_> = self
            .store()
            .list(Some(dir))
            .try_collect()
            .await
            .map_err(storage(dir))?;
        Ok(objects.into_iter().map(|o| o.location).collect())
    }

    /// Deletes `paths` in order; missing ones are fine.
    pub(crate) async fn delete_paths(&self, paths: &[ObjectPath]) -> StateResult<()> {
        for path in paths {
            match self.store().delete(path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(storage(path)(e)),
            }
        }
        Ok(())
    }

    /// On a local root, removes the directory of `dir` once its objects are deleted (a
    /// local file system keeps empty directories, which would still list).
    pub(crate) fn remove_local_dir(&self, dir: &ObjectPath) -> StateResult<()> {
        let Some(root) = &self.root.local_dir else {
            return Ok(());
        };
        let local = root.join(dir.as_ref());
        match std::fs::remove_dir_all(&local) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StateError::Io {
                path: local.display().to_string(),
                source: e,
            }),
        }
    }

    /// Makes written objects durable on local disk: fsync each file, then each distinct
    /// directory once. Runs on the blocking pool: an fsync must not stall a worker
    /// thread that runs tasks.
    pub(crate) async fn sync(&self, paths: &[ObjectPath]) -> StateResult<()> {
        let Some(dir) = &self.root.local_dir else {
            return Ok(());
        };
        let files: Vec<PathBuf> = paths.iter().map(|p| dir.join(p.as_ref())).collect();
        let synced = tokio::task::spawn_blocking(move || sync_files(&files)).await;
        match synced {
            Ok(result) => result,
            Err(e) => Err(StateError::Io {
                path: dir.display().to_string(),
                source: std::io::Error::other(e),
            }),
        }
    }

    /// Copies an object within this store. A savepoint must outlive the checkpoint it
    /// was taken from, and damage to one must not reach the other: on a local root the
    /// bytes are copied (object_store's local copy is a hard link), with a copy-on-write
    /// clone where the file system offers one (`copy_file_range`); elsewhere the store
    /// copies server-side.
    ///
    /// # Errors
    /// Storage failures, naming the source.
    pub(crate) async fn copy_object(&self, from: &ObjectPath, to: &ObjectPath) -> StateResult<()> {
        let Some(dir) = &self.root.local_dir else {
            return self.root.bulk.copy(from, to).await.map_err(storage(from));
        };
        let (from, to) = (dir.join(from.as_ref()), dir.join(to.as_ref()));
        let copied = tokio::task::spawn_blocking(move || {
            let io = |path: &Path| {
                let path = path.display().to_string();
                move |source| StateError::Io { path, source }
            };
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(io(parent))?;
            }
            std::fs::copy(&from, &to).map(|_| ()).map_err(io(&from))
        })
        .await;
        copied.unwrap_or_else(|e| {
            Err(StateError::Io {
                path: dir.display().to_string(),
                source: std::io::Error::other(e),
            })
        })
    }

    /// Writes one object without syncing (callers sync a batch with [`sync`](Self::sync)).
    pub(crate) async fn put_unsynced(
        &self,
        path: &ObjectPath,
        bytes: Bytes,
        mode: PutMode,
    ) -> StateResult<()> {
        Self::put_to(self.store(), path, bytes, mode).await
    }

    async fn put_to(
        store: &Arc<dyn ObjectStore>,
        path: &ObjectPath,
        bytes: Bytes,
        mode: PutMode,
    ) -> StateResult<()> {
        let options = PutOptions {
            mode,
            ..PutOptions::default()
        };
        store
            .put_opts(path, PutPayload::from(bytes), options)
            .await
            .map_err(storage(path))?;
        Ok(())
    }

    async fn put(&self, path: &ObjectPath, bytes: Bytes, mode: PutMode) -> StateResult<()> {
        self.put_unsynced(path, bytes, mode).await?;
        self.sync(std::slice::from_ref(path)).await
    }

    /// Writes one subtask's state for `epoch`: the files of its [`file_plan`], held
    /// batches encoded here, a streamed part's rows pulled and encoded on a blocking
    /// thread a file at a time while the one before is stored. Returns what each file
    /// (or part's files) holds, in the manifest's order.
    ///
    /// # Errors
    /// Encoding, reading a streamed part, or storage failures.
    pub async fn write_state(
        &self,
        epoch: Epoch,
        generation: u64,
        operator: &str,
        subtask: usize,
        state: &OperatorState,
    ) -> StateResult<Vec<WrittenFiles>> {
        let mut written = Vec::new();
        let mut paths = Vec::new();
        let mut put = |file: EncodedFile| {
            let path = self
                .layout
                .state_file(epoch, generation, operator, subtask, paths.len());
            paths.push(path.clone());
            let entry = FileEntry {
                path: self.layout.relative(&path),
                rows: file.rows,
                bytes: file.bytes.len() as u64,
                crc32c: file.crc32c,
            };
            let bulk = self.root.bulk.clone();
            async move {
                Self::put_to(&bulk, &path, file.bytes, PutMode::Overwrite).await?;
                Ok::<_, StateError>(entry)
            }
        };
        for plan in file_plan(state) {
            match plan {
                FilePlan::Held(positions) => {
                    let file = state_file::encode_held(
                        operator,
                        positions.iter().map(|&i| &state.batches[i]),
                    )?;
                    let entry = put(file).await?;
                    written.push(WrittenFiles {
                        files: vec![entry],
                        batches: positions,
                    });
                }
                FilePlan::Streamed(i) => {
                    let Some(streamed) = state.streamed_for(&state.batches[i]) else {
                        continue; // a plan names only placeholders as streamed
                    };
                    let source = streamed.take_source().map_err(|source| StateError::Read {
                        operator: operator.to_string(),
                        source,
                    })?;
                    let (files_tx, mut files_rx) = tokio::sync::mpsc::channel(1);
                    let (name, schema, part_bytes) = (
                        operator.to_string(),
                        streamed.schema().clone(),
                        self.part_bytes,
                    );
                    let encoder = tokio::task::spawn_blocking(move || {
                        encode_streamed(&name, &schema, source, part_bytes, |file| {
                            // The writer gave up (a failed upload): stop reading.
                            files_tx.blocking_send(file).map_err(|_| StateError::Read {
                                operator: name.clone(),
                                source: riffle_core::Error::Spill("the writer stopped".into()),
                            })
                        })
                    });
                    let mut files = Vec::new();
                    while let Some(file) = files_rx.recv().await {
                        files.push(put(file).await?);
                    }
                    encoder.await.map_err(|e| StateError::Io {
                        path: format!("state of `{operator}`"),
                        source: std::io::Error::other(e),
                    })??;
                    written.push(WrittenFiles {
                        files,
                        batches: vec![i],
                    });
                }
            }
        }
        self.sync(&paths).await?;
        Ok(written)
    }

    /// Writes the control record of a running job: `_control.json` for a job in one
    /// process, `_control/worker-{n}.json` for worker `n` of several.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn write_control(&self, worker: Option<usize>, json: Vec<u8>) -> StateResult<()> {
        self.put(
            &self.control_path(worker),
            Bytes::from(json),
            PutMode::Overwrite,
        )
        .await
    }

    fn control_path(&self, worker: Option<usize>) -> ObjectPath {
        match worker {
            None => self.layout.control(),
            Some(n) => self.layout.worker_control(n),
        }
    }

    /// The job's secret (`_control_token`): the one already there, or else `candidate`,
    /// which this call then stores. Of processes that start together (the workers of a
    /// job) exactly one stores its candidate and every one gets that one: the object is
    /// created only if absent. It outlives runs; deleting it makes the next run draw a
    /// new one. On a local root the file is readable by its owner only (mode 0600) from
    /// the moment it appears; on an object store, who may read it is the bucket's access
    /// policy.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn job_token(&self, candidate: &str) -> StateResult<String> {
        let path = self.layout.control_token();
        let local = self.root.local_dir.as_ref().map(|d| d.join(path.as_ref()));
        let io = |file: &Path| {
            let path = file.display().to_string();
            move |source| StateError::Io { path, source }
        };
        match self.read_control_token().await? {
            Some(existing) if !existing.is_empty() => {
                if let Some(file) = &local {
                    // Whoever loosened it, it is the job's secret: owner only.
                    owner_only(file).map_err(io(file))?;
                }
                return Ok(existing);
            }
            // An empty token (a crash while one was written before creation was
            // atomic, or an operator's edit) protects nothing: it is drawn again.
            Some(_) => self.delete_paths(std::slice::from_ref(&path)).await?,
            None => {}
        }
        let created = match &local {
            Some(file) => create_owner_only(file, candidate.as_bytes()).map_err(io(file)),
            None => {
                let bytes = Bytes::from(candidate.to_string());
                match self.put_unsynced(&path, bytes, PutMode::Create).await {
                    Err(StateError::Storage {
                        source: object_store::Error::AlreadyExists { .. },
                        ..
                    }) => Ok(false),
                    other => other.map(|()| true),
                }
            }
        }?;
        if created {
            return Ok(candidate.to_string());
        }
        // Another process stored its token first.
        self.read_control_token()
            .await?
            .filter(|t| !t.is_empty())
            .ok_or_else(|| StateError::Corrupt {
                path: path.to_string(),
                reason: "the job token was created and is gone or empty".into(),
            })
    }

    /// Reads `_control_token`, if there is one.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn read_control_token(&self) -> StateResult<Option<String>> {
        let bytes = self.get_optional(&self.layout.control_token()).await?;
        Ok(bytes.map(|b| String::from_utf8_lossy(&b).trim().to_string()))
    }

    /// Reads the control record of a job in one process (`worker` `None`) or of one
    /// worker, if there is one.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn read_control(&self, worker: Option<usize>) -> StateResult<Option<Bytes>> {
        self.get_optional(&self.control_path(worker)).await
    }

    /// The workers whose control records are in `_control/`, in order.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn control_workers(&self) -> StateResult<Vec<usize>> {
        let mut workers: Vec<usize> = self
            .list_under(&self.layout.worker_controls_dir())
            .await?
            .iter()
            .filter_map(|p| {
                let name = p.filename()?;
                name.strip_prefix("worker-")?
                    .strip_suffix(".json")?
                    .parse()
                    .ok()
            })
            .collect();
        workers.sort_unstable();
        Ok(workers)
    }

    /// Removes a control record (the job's token stays: it is the job's, not the run's).
    ///
    /// # Errors
    /// Storage failures.
    pub async fn delete_control(&self, worker: Option<usize>) -> StateResult<()> {
        self.delete_paths(&[self.control_path(worker)]).await
    }

    /// Reads one state file, checking size and CRC32C.
    ///
    /// # Errors
    /// [`StateError::Corrupt`] for a missing, truncated or altered file.
    pub async fn read_state(&self, entry: &FileEntry) -> StateResult<Vec<RecordBatch>> {
        let bytes = self.read_bytes(&entry.path).await?;
        state_file::decode(entry, bytes)
    }

    /// Reads a state file and checks it against `entry` (size, CRC32C, the row count
    /// in its footer), leaving its data encoded: [`state_file::decode_checked`]
    /// decodes it when it is needed.
    ///
    /// # Errors
    /// [`StateError::Corrupt`] for a missing, truncated, altered or miscounted file.
    pub async fn read_checked(&self, entry: &FileEntry) -> StateResult<Bytes> {
        let bytes = self.read_bytes(&entry.path).await?;
        state_file::check_file(entry, &bytes)?;
        Ok(bytes)
    }

    /// Writes `recovery/{at_ms}-g{generation}.json`: what a recovery chose and why.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn write_recovery_record(
        &self,
        at_ms: i64,
        generation: u64,
        json: Vec<u8>,
    ) -> StateResult<()> {
        let path = self.layout.recovery_record(at_ms, generation);
        self.put(&path, Bytes::from(json), PutMode::Overwrite).await
    }

    /// Every recovery record, oldest first, as JSON text.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn recovery_records(&self) -> StateResult<Vec<String>> {
        use futures::TryStreamExt;
        let dir = self.layout.recovery_dir();
        let mut objects: Vec<_> = self
            .store()
            .list(Some(&dir))
            .try_collect()
            .await
            .map_err(storage(&dir))?;
        objects.sort_by(|a, b| a.location.cmp(&b.location));
        let mut out = Vec::new();
        for o in objects {
            let bytes = self
                .store()
                .get(&o.location)
                .await
                .map_err(storage(&o.location))?
                .bytes()
                .await
                .map_err(storage(&o.location))?;
            out.push(String::from_utf8_lossy(&bytes).into_owned());
        }
        Ok(out)
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Fsyncs `files`, then each of their directories once.
fn sync_files(files: &[PathBuf]) -> StateResult<()> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| StateError::Io { path, source }
    };
    let mut dirs = Vec::new();
    for file in files {
        std::fs::File::open(file)
            .and_then(|f| f.sync_all())
            .map_err(io(file))?;
        if let Some(parent) = file.parent() {
            if !dirs.contains(&parent) {
                dirs.push(parent);
            }
        }
    }
    for dir in dirs {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io(dir))?;
    }
    Ok(())
}

/// Creates (or truncates) `file` readable and writable by its owner only, then writes
/// `bytes`: the secret is never in a file others may read.
/// Creates `file` with `bytes`, readable by its owner only, unless it exists (then
/// `Ok(false)`). The bytes are written to a private temporary file of its own first
/// (created exclusively, under a random name: processes of several containers may
/// share a pid) and linked into place, so a reader never sees the file empty or half
/// written.
fn create_owner_only(file: &std::path::Path, bytes: &[u8]) -> std::io::Result<bool> {
    use std::io::Write;
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let (temporary, mut out) = loop {
        let temporary = file.with_extension(format!("tmp-{}", uuid::Uuid::new_v4().simple()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        match options.open(&temporary) {
            Ok(out) => break (temporary, out),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    };
    let written = out.write_all(bytes).and_then(|()| out.sync_all());
    let linked = written.and_then(|()| std::fs::hard_link(&temporary, file));
    let _ = std::fs::remove_file(&temporary);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// Makes `file` readable and writable by its owner only.
fn owner_only(file: &std::path::Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))?;
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(())
}
