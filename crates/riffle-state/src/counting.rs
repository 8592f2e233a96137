//! Counting what a checkpoint costs on object storage: a wrapper around an
//! [`ObjectStore`] that counts requests by kind and the bytes they carry, so a user can
//! price a checkpoint interval (S3 bills per request) before choosing it.

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Requests and bytes counted so far (shared by every handle counting into them).
#[derive(Debug, Default)]
pub struct RequestCounts {
    put: AtomicU64,
    get: AtomicU64,
    head: AtomicU64,
    list: AtomicU64,
    delete: AtomicU64,
    copy: AtomicU64,
    bytes_written: AtomicU64,
    bytes_read: AtomicU64,
}

/// [`RequestCounts`] at one moment, or the difference of two moments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestTally {
    /// PUTs (one per multipart upload started, too).
    pub put: u64,
    /// GETs with a body.
    pub get: u64,
    /// HEADs.
    pub head: u64,
    /// LIST pages asked for.
    pub list: u64,
    /// DELETEs.
    pub delete: u64,
    /// Server-side COPYs.
    pub copy: u64,
    /// Bytes sent by PUTs.
    pub bytes_written: u64,
    /// Bytes received by GETs.
    pub bytes_read: u64,
}

impl RequestTally {
    /// What happened between `earlier` and `self`.
    pub fn since(self, earlier: RequestTally) -> RequestTally {
        RequestTally {
            put: self.put.saturating_sub(earlier.put),
            get: self.get.saturating_sub(earlier.get),
            head: self.head.saturating_sub(earlier.head),
            list: self.list.saturating_sub(earlier.list),
            delete: self.delete.saturating_sub(earlier.delete),
            copy: self.copy.saturating_sub(earlier.copy),
            bytes_written: self.bytes_written.saturating_sub(earlier.bytes_written),
            bytes_read: self.bytes_read.saturating_sub(earlier.bytes_read),
        }
    }

    /// `self` and `other` together.
    pub fn plus(self, other: RequestTally) -> RequestTally {
        RequestTally {
            put: self.put + other.put,
            get: self.get + other.get,
            head: self.head + other.head,
            list: self.list + other.list,
            delete: self.delete + other.delete,
            copy: self.copy + other.copy,
            bytes_written: self.bytes_written + other.bytes_written,
            bytes_read: self.bytes_read + other.bytes_read,
        }
    }

    /// Requests of every kind.
    pub fn requests(&self) -> u64 {
        self.put + self.get + self.head + self.list + self.delete + self.copy
    }

    /// Each kind of request with its count, in a fixed order (`put`, `get`, `head`,
    /// `list`, `delete`, `copy`).
    pub fn by_kind(&self) -> [(&'static str, u64); 6] {
        [
            ("put", self.put),
            ("get", self.get),
            ("head", self.head),
            ("list", self.list),
            ("delete", self.delete),
            ("copy", self.copy),
        ]
    }

    /// `12 PUT, 3 GET, 1 LIST, 0.4 MiB up` — the kinds that happened, for a CLI line.
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> = self
            .by_kind()
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(kind, n)| format!("{n} {}", kind.to_uppercase()))
            .collect();
        if parts.is_empty() {
            return "no requests".into();
        }
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        if self.bytes_written > 0 {
            parts.push(format!("{:.1} MiB up", mib(self.bytes_written)));
        }
        if self.bytes_read > 0 {
            parts.push(format!("{:.1} MiB down", mib(self.bytes_read)));
        }
        parts.join(", ")
    }
}

impl RequestCounts {
    /// The counts now.
    pub fn tally(&self) -> RequestTally {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RequestTally {
            put: load(&self.put),
            get: load(&self.get),
            head: load(&self.head),
            list: load(&self.list),
            delete: load(&self.delete),
            copy: load(&self.copy),
            bytes_written: load(&self.bytes_written),
            bytes_read: load(&self.bytes_read),
        }
    }

    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// An [`ObjectStore`] that counts every request it passes on into [`RequestCounts`].
/// A request counts whether or not it succeeded: the store bills it either way.
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    counts: Arc<RequestCounts>,
}

impl CountingStore {
    /// `inner`, counting into `counts`.
    pub fn new(inner: Arc<dyn ObjectStore>, counts: Arc<RequestCounts>) -> Self {
        Self { inner, counts }
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "counting({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        RequestCounts::add(&self.counts.put, 1);
        RequestCounts::add(&self.counts.bytes_written, payload.content_length() as u64);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        RequestCounts::add(&self.counts.put, 1);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let head = options.head;
        RequestCounts::add(
            if head {
                &self.counts.head
            } else {
                &self.counts.get
            },
            1,
        );
        let result = self.inner.get_opts(location, options).await?;
        if !head {
            RequestCounts::add(
                &self.counts.bytes_read,
                result.range.end - result.range.start,
            );
        }
        Ok(result)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let counts = self.counts.clone();
        let counted = locations
            .inspect(move |_| RequestCounts::add(&counts.delete, 1))
            .boxed();
        self.inner.delete_stream(counted)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        // A listing is one request per page of up to 1000 keys (S3's page size).
        let counts = self.counts.clone();
        RequestCounts::add(&counts.list, 1);
        let mut seen = 0u64;
        self.inner
            .list(prefix)
            .inspect(move |_| {
                seen += 1;
                if seen > 1 && seen % 1000 == 1 {
                    RequestCounts::add(&counts.list, 1);
                }
            })
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        RequestCounts::add(&self.counts.list, 1);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        RequestCounts::add(&self.counts.copy, 1);
        self.inner.copy_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::TryStreamExt;
    use object_store::memory::InMemory;
    use object_store::ObjectStoreExt;

    #[tokio::test]
    async fn every_kind_of_request_is_counted_with_its_bytes() {
        let counts = Arc::new(RequestCounts::default());
        let store = CountingStore::new(Arc::new(InMemory::new()), counts.clone());
        let (a, b) = (Path::from("dir/a"), Path::from("dir/b"));
        store
            .put(&a, PutPayload::from_static(b"hello"))
            .await
            .unwrap();
        let before = counts.tally();
        assert_eq!(store.get(&a).await.unwrap().bytes().await.unwrap().len(), 5);
        store.head(&a).await.unwrap();
        store.copy(&a, &b).await.unwrap();
        let listed: Vec<_> = store
            .list(Some(&Path::from("dir")))
            .try_collect()
            .await
            .unwrap();
        assert_eq!(listed.len(), 2);
        store.list_with_delimiter(None).await.unwrap();
        store.delete(&a).await.unwrap();
        let tally = counts.tally();
        assert_eq!((before.put, before.bytes_written), (1, 5));
        let since = tally.since(before);
        assert_eq!(
            since,
            RequestTally {
                put: 0,
                get: 1,
                head: 1,
                list: 2,
                delete: 1,
                copy: 1,
                bytes_written: 0,
                bytes_read: 5,
            }
        );
        assert_eq!(since.requests(), 6);
        assert_eq!(
            since.summary(),
            "1 GET, 1 HEAD, 2 LIST, 1 DELETE, 1 COPY, 0.0 MiB down"
        );
    }

    #[tokio::test]
    async fn a_long_listing_counts_one_request_per_thousand_keys() {
        let counts = Arc::new(RequestCounts::default());
        let store = CountingStore::new(Arc::new(InMemory::new()), counts.clone());
        for i in 0..2500 {
            store
                .put(
                    &Path::from(format!("k/{i:05}")),
                    PutPayload::from_static(b"x"),
                )
                .await
                .unwrap();
        }
        let before = counts.tally();
        let listed: Vec<_> = store.list(None).try_collect().await.unwrap();
        assert_eq!(listed.len(), 2500);
        assert_eq!(counts.tally().since(before).list, 3);
    }
}
