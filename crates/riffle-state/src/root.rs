//! Parsing a state root URL into an object store and a prefix.

use crate::error::{StateError, StateResult};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::ObjectStore;
use object_store::{BackoffConfig, ClientConfigKey, RetryConfig};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How long one S3 request for a small object (a manifest, a claim, a listing) may
/// take before it is cut off (and retried if idempotent, within [`RETRY_WINDOW`]).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// No retry of a failed S3 request starts later than this after its first attempt.
pub const RETRY_WINDOW: Duration = Duration::from_secs(15);

/// How long one S3 transfer of a state file may take: state files may be large, and
/// `--checkpoint-timeout` bounds their upload as a whole.
pub const TRANSFER_TIMEOUT: Duration = Duration::from_secs(120);

/// Where checkpoints live.
#[derive(Debug, Clone)]
pub struct StateRoot {
    /// The store, for small objects (manifests, claims, markers, listings).
    pub store: Arc<dyn ObjectStore>,
    /// The same store for state files, whose transfers may take longer than one
    /// request on `store` may (on S3 a second client; otherwise `store` itself).
    pub bulk: Arc<dyn ObjectStore>,
    /// Prefix inside the store under which pipelines keep their state.
    pub prefix: ObjectPath,
    /// For `file://` roots, the local directory (to fsync what was written).
    pub local_dir: Option<PathBuf>,
    /// The URL as given, for messages.
    pub url: String,
}

impl StateRoot {
    /// Parses `file:///abs/dir`, a plain path (`./riffle-state`), `s3://bucket/prefix`
    /// or `memory://`.
    ///
    /// S3 settings come from the standard environment variables: `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, and for S3-compatible servers
    /// `AWS_ENDPOINT` (e.g. `http://127.0.0.1:9000`) with `AWS_ALLOW_HTTP=true`.
    ///
    /// # Errors
    /// An unsupported scheme, S3 settings that do not build a client, or a local
    /// directory that cannot be created.
    pub fn parse(url: &str) -> StateResult<Self> {
        Self::parse_with_options(url, &[])
    }

    /// As [`parse`](Self::parse), with S3 settings given as `object_store` config keys
    /// (`aws_endpoint`, `aws_allow_http`, `aws_access_key_id`, …) that override the
    /// environment.
    ///
    /// # Errors
    /// As [`parse`](Self::parse), or an unknown S3 config key.
    pub fn parse_with_options(url: &str, s3_options: &[(&str, &str)]) -> StateResult<Self> {
        let bad = |message: &str| StateError::Root {
            url: url.to_string(),
            message: message.to_string(),
        };
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(bad("an S3 root needs a bucket: s3://bucket/prefix"));
            }
            // Fail an unreachable or hung store within seconds, not object_store's
            // default minutes: a checkpoint has its own timeout and the job must say
            // why (docs/operations.md, "S3").
            let retry = RetryConfig {
                backoff: BackoffConfig::default(),
                max_retries: 3,
                retry_timeout: RETRY_WINDOW,
            };
            let client = |timeout: Duration| -> StateResult<Arc<dyn ObjectStore>> {
                // As config keys: client options would replace those the environment
                // set (AWS_ALLOW_HTTP among them).
                let seconds = |d: Duration| format!("{}s", d.as_secs());
                let mut builder = AmazonS3Builder::from_env()
                    .with_bucket_name(bucket)
                    .with_retry(retry.clone())
                    .with_config(
                        AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
                        seconds(timeout),
                    )
                    .with_config(
                        AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
                        seconds(REQUEST_TIMEOUT),
                    );
                for (key, value) in s3_options {
                    let key = key
                        .parse::<AmazonS3ConfigKey>()
                        .map_err(|e| bad(&format!("S3 option `{key}`: {e}")))?;
                    builder = builder.with_config(key, *value);
                }
                let store = builder.build().map_err(|e| StateError::Root {
                    url: url.to_string(),
                    message: format!(
                        "{e}; set AWS_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT, AWS_ALLOW_HTTP=true for an S3-compatible server)"
                    ),
                })?;
                Ok(Arc::new(store))
            };
            return Ok(Self {
                store: client(REQUEST_TIMEOUT)?,
                bulk: client(TRANSFER_TIMEOUT)?,
                prefix: ObjectPath::from(prefix.trim_end_matches('/')),
                local_dir: None,
                url: url.to_string(),
            });
        }
        if url == "memory://" || url.starts_with("memory://") {
            let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
            return Ok(Self {
                bulk: store.clone(),
                store,
                prefix: ObjectPath::from(url.trim_start_matches("memory://")),
                local_dir: None,
                url: url.to_string(),
            });
        }
        let local = match url.strip_prefix("file://") {
            Some(path) => PathBuf::from(path),
            None if url.contains("://") => {
                return Err(bad(
                    "supported roots are file:///path, a plain directory path, s3://bucket/prefix and memory://",
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
        let store: Arc<dyn ObjectStore> = Arc::new(store);
        Ok(Self {
            bulk: store.clone(),
            store,
            prefix: ObjectPath::from(""),
            local_dir: Some(dir),
            url: url.to_string(),
        })
    }
}
