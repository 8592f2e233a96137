//! Where a table's files live: a local directory (`file:///…`) or an S3 bucket
//! (`s3://bucket/prefix`, through `object_store`). The iceberg crate reads and writes
//! table metadata and manifests through [`WarehouseStorage`]; riffle's data-file writer
//! and recovery use [`Location`] directly (docs/connectors.md, "iceberg").
//!
//! S3 settings come from the same environment variables as an `s3://` state root
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, and `AWS_ENDPOINT` with
//! `AWS_ALLOW_HTTP=true` for an S3-compatible server), so one set serves both.

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use iceberg::io::{
    FileMetadata, FileRead, FileWrite, InputFile, LocalFsStorage, OutputFile, Storage,
    StorageConfig, StorageFactory,
};
use iceberg::ErrorKind;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use riffle_core::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// A file or directory of a table, resolved to the store that holds it.
#[derive(Debug, Clone)]
pub enum Location {
    /// `file:///path`.
    Local(PathBuf),
    /// `s3://bucket/key`: the bucket's store and the key.
    Object {
        store: Arc<dyn ObjectStore>,
        key: ObjectPath,
    },
}

/// Resolves `location` (`file:///…` or `s3://bucket/…`).
///
/// # Errors
/// Another scheme; S3 settings that do not build a client.
pub fn locate(location: &str) -> Result<Location> {
    if let Some(path) = local_path(location) {
        return Ok(Location::Local(path));
    }
    if let Some(rest) = location.strip_prefix("s3://") {
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        if !bucket.is_empty() {
            return Ok(Location::Object {
                store: bucket_store(bucket)?,
                key: ObjectPath::from(key.trim_end_matches('/')),
            });
        }
    }
    Err(Error::config(
        "warehouse",
        format!("'{location}': Iceberg tables live in 'file:///path' or 's3://bucket/prefix'"),
    ))
}

/// The local path of a `file:///…` location; `None` for other locations.
pub fn local_path(location: &str) -> Option<PathBuf> {
    location
        .strip_prefix("file://")
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
}

/// Whether `location` names a place riffle can write (the check of the `warehouse`
/// option, before any client is built).
pub fn is_supported(location: &str) -> bool {
    location.starts_with("file:///")
        || location
            .strip_prefix("s3://")
            .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/'))
}

/// One client per bucket for the whole process (the catalog, the sink's subtasks and
/// its recovery share it), built as an `s3://` state root builds its bulk client.
fn bucket_store(bucket: &str) -> Result<Arc<dyn ObjectStore>> {
    static STORES: OnceLock<Mutex<HashMap<String, Arc<dyn ObjectStore>>>> = OnceLock::new();
    let mut stores = STORES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(store) = stores.get(bucket) {
        return Ok(store.clone());
    }
    let root = riffle_state::StateRoot::parse(&format!("s3://{bucket}"))
        .map_err(|e| Error::config("warehouse", e.to_string()))?;
    stores.insert(bucket.to_string(), root.bulk.clone());
    Ok(root.bulk)
}

/// The paths, relative to `dir`, of the files under it (partition directories
/// included), sorted; none when it does not exist.
///
/// # Errors
/// Storage failures.
pub async fn list_files(dir: &Location) -> Result<Vec<String>> {
    let mut files = Vec::new();
    match dir {
        Location::Local(root) => {
            let mut stack = vec![root.clone()];
            while let Some(path) = stack.pop() {
                let entries = match std::fs::read_dir(&path) {
                    Ok(entries) => entries,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(Error::io(&path, e)),
                };
                for entry in entries {
                    let entry = entry.map_err(|e| Error::io(&path, e))?;
                    let is_dir = entry.file_type().map_err(|e| Error::io(&path, e))?.is_dir();
                    if is_dir {
                        stack.push(entry.path());
                    } else if let Ok(relative) = entry.path().strip_prefix(root) {
                        files.push(relative.to_string_lossy().into_owned());
                    }
                }
            }
        }
        Location::Object { store, key } => {
            let listed: Vec<_> = store
                .list(Some(key))
                .try_collect()
                .await
                .map_err(|e| object_error("listing", key, e))?;
            let prefix = format!("{key}/");
            files.extend(listed.into_iter().filter_map(|meta| {
                meta.location
                    .as_ref()
                    .strip_prefix(&prefix)
                    .map(str::to_string)
            }));
        }
    }
    files.sort();
    Ok(files)
}

/// Whether the file at `location` exists.
///
/// # Errors
/// Storage failures.
pub async fn exists(location: &Location) -> Result<bool> {
    match location {
        Location::Local(path) => Ok(path.exists()),
        Location::Object { store, key } => object_exists(store, key)
            .await
            .map_err(|e| object_error("looking up", key, e)),
    }
}

/// Deletes the file at `location` (gone already is fine).
///
/// # Errors
/// Storage failures.
pub async fn delete(location: &Location) -> Result<()> {
    match location {
        Location::Local(path) => match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(path, e)),
            _ => Ok(()),
        },
        Location::Object { store, key } => delete_object(store, key)
            .await
            .map_err(|e| object_error("deleting", key, e)),
    }
}

/// Writes `bytes` as the object `key` of `store`.
///
/// # Errors
/// Storage failures.
pub async fn upload(store: &Arc<dyn ObjectStore>, key: &ObjectPath, bytes: Bytes) -> Result<()> {
    put_object(store, key, bytes)
        .await
        .map_err(|e| object_error("writing", key, e))
}

// The object operations riffle's writer and recovery share with the crate's storage
// below; each side names the failure in its own error type.

async fn object_exists(
    store: &Arc<dyn ObjectStore>,
    key: &ObjectPath,
) -> object_store::Result<bool> {
    match store.head(key).await {
        Ok(_) => Ok(true),
        Err(object_store::Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Gone already is fine.
async fn delete_object(store: &Arc<dyn ObjectStore>, key: &ObjectPath) -> object_store::Result<()> {
    match store.delete(key).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

async fn put_object(
    store: &Arc<dyn ObjectStore>,
    key: &ObjectPath,
    bytes: Bytes,
) -> object_store::Result<()> {
    store.put(key, PutPayload::from(bytes)).await.map(|_| ())
}

fn object_error(doing: &str, key: &ObjectPath, e: object_store::Error) -> Error {
    Error::external("s3", format!("{doing} {key}: {e}"))
}

/// The iceberg crate's storage for every table riffle opens: local paths through the
/// crate's own local storage, `s3://` through `object_store`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WarehouseStorage;

/// Builds [`WarehouseStorage`] for the catalog.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WarehouseStorageFactory;

#[typetag::serde]
impl StorageFactory for WarehouseStorageFactory {
    fn build(&self, _config: &StorageConfig) -> iceberg::Result<Arc<dyn Storage>> {
        Ok(Arc::new(WarehouseStorage))
    }
}

/// [`locate`] for the crate: local files go to its own storage, objects to ours.
fn resolve(path: &str) -> iceberg::Result<Location> {
    locate(path).map_err(|e| iceberg::Error::new(ErrorKind::DataInvalid, e.to_string()))
}

fn crate_error(doing: &str, key: &ObjectPath, e: object_store::Error) -> iceberg::Error {
    let kind = match e {
        object_store::Error::NotFound { .. } => ErrorKind::DataInvalid,
        _ => ErrorKind::Unexpected,
    };
    iceberg::Error::new(kind, format!("{doing} s3 object {key}: {e}"))
}

#[async_trait]
#[typetag::serde]
impl Storage for WarehouseStorage {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        match resolve(path)? {
            Location::Local(_) => LocalFsStorage::new().exists(path).await,
            Location::Object { store, key } => object_exists(&store, &key)
                .await
                .map_err(|e| crate_error("looking up", &key, e)),
        }
    }

    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        match resolve(path)? {
            Location::Local(_) => LocalFsStorage::new().metadata(path).await,
            Location::Object { store, key } => store
                .head(&key)
                .await
                .map(|meta| FileMetadata { size: meta.size })
                .map_err(|e| crate_error("looking up", &key, e)),
        }
    }

    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        match resolve(path)? {
            Location::Local(_) => LocalFsStorage::new().read(path).await,
            Location::Object { store, key } => {
                let got = store
                    .get(&key)
                    .await
                    .map_err(|e| crate_error("reading", &key, e))?;
                got.bytes()
                    .await
                    .map_err(|e| crate_error("reading", &key, e))
            }
        }
    }

    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        match resolve(path)? {
            Location::Local(_) => LocalFsStorage::new().reader(path).await,
            Location::Object { store, key } => Ok(Box::new(ObjectRead { store, key })),
        }
    }

    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        match resolve(path)? {
            Location::Local(_) => LocalFsStorage::new().write(path, bs).await,
            Location::Object { store, key } => put_object(&store, &key, bs)
                .await
                .map_err(|e| crate_error("writing", &key, e)),
        }
    }

    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        match resolve(path)? {
            Location::Local(_) => LocalFsStorage::new().writer(path).await,
            Location::Object { store, key } => Ok(Box::new(ObjectWrite {
                store,
                key,
                buffer: Vec::new(),
                closed: false,
            })),
        }
    }

    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        match resolve(path)? {
            Location::Local(_) => LocalFsStorage::new().delete(path).await,
            Location::Object { store, key } => delete_object(&store, &key)
                .await
                .map_err(|e| crate_error("deleting", &key, e)),
        }
    }

    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        match resolve(path)? {
            Location::Local(_) => LocalFsStorage::new().delete_prefix(path).await,
            Location::Object { store, key } => {
                let keys = store.list(Some(&key)).map_ok(|meta| meta.location).boxed();
                store
                    .delete_stream(keys)
                    .try_collect::<Vec<_>>()
                    .await
                    .map(|_| ())
                    .map_err(|e| crate_error("deleting under", &key, e))
            }
        }
    }

    async fn delete_stream(&self, mut paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        while let Some(path) = paths.next().await {
            self.delete(&path).await?;
        }
        Ok(())
    }

    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

/// Ranged reads of one object (manifests and manifest lists, read by the crate).
struct ObjectRead {
    store: Arc<dyn ObjectStore>,
    key: ObjectPath,
}

#[async_trait]
impl FileRead for ObjectRead {
    async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
        self.store
            .get_range(&self.key, range)
            .await
            .map_err(|e| crate_error("reading", &self.key, e))
    }
}

/// A metadata file or manifest the crate writes: small, so it is buffered and put as
/// one object at close (an object appears whole or not at all).
struct ObjectWrite {
    store: Arc<dyn ObjectStore>,
    key: ObjectPath,
    buffer: Vec<u8>,
    closed: bool,
}

#[async_trait]
impl FileWrite for ObjectWrite {
    async fn write(&mut self, bs: Bytes) -> iceberg::Result<()> {
        self.buffer.extend_from_slice(&bs);
        Ok(())
    }

    async fn close(&mut self) -> iceberg::Result<()> {
        if std::mem::replace(&mut self.closed, true) {
            return Err(iceberg::Error::new(
                ErrorKind::Unexpected,
                format!("s3 object {} closed twice", self.key),
            ));
        }
        let bytes = Bytes::from(std::mem::take(&mut self.buffer));
        put_object(&self.store, &self.key, bytes)
            .await
            .map_err(|e| crate_error("writing", &self.key, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warehouses_are_local_directories_or_s3_buckets() {
        assert!(is_supported("file:///var/lake"));
        assert!(is_supported("s3://lake/warehouse"));
        assert!(is_supported("s3://lake"));
        assert!(!is_supported("s3:///warehouse"));
        assert!(!is_supported("file://relative/dir"));
        assert!(!is_supported("gs://lake/warehouse"));
        assert!(matches!(
            locate("file:///var/lake/t/data").unwrap(),
            Location::Local(p) if p == std::path::Path::new("/var/lake/t/data")
        ));
        assert!(locate("gs://lake/warehouse").is_err());
        assert_eq!(local_path("s3://b/t/data"), None);
    }

    #[tokio::test]
    async fn a_local_directory_lists_its_files_with_partition_directories_and_a_missing_one_is_empty(
    ) {
        let dir = tempfile::tempdir().unwrap();
        let data = Location::Local(dir.path().join("data"));
        assert!(list_files(&data).await.unwrap().is_empty());
        std::fs::create_dir_all(dir.path().join("data/day=2026-12-03")).unwrap();
        std::fs::write(dir.path().join("data/a.parquet"), b"x").unwrap();
        std::fs::write(dir.path().join("data/day=2026-12-03/b.parquet"), b"x").unwrap();
        assert_eq!(
            list_files(&data).await.unwrap(),
            ["a.parquet", "day=2026-12-03/b.parquet"]
        );
        let file = Location::Local(dir.path().join("data/a.parquet"));
        assert!(exists(&file).await.unwrap());
        delete(&file).await.unwrap();
        delete(&file).await.unwrap();
        assert!(!exists(&file).await.unwrap());
    }
}
