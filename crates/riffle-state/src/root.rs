//! Parsing a state root URL into an object store and a prefix.

use crate::error::{StateError, StateResult};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::ObjectStore;
use object_store::{BackoffConfig, RetryConfig};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

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
            // Fail an unreachable store within seconds, not object_store's default
            // minutes: a checkpoint has its own timeout and the job must say why.
            let retry = RetryConfig {
                backoff: BackoffConfig::default(),
                max_retries: 3,
                retry_timeout: Duration::from_secs(15),
            };
            let mut builder = AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .with_retry(retry);
            for (key, value) in s3_options {
                let key = key
                    .parse::<AmazonS3ConfigKey>()
                    .map_err(|e| bad(&format!("S3 option `{key}`: {e}")))?;
                builder = builder.with_config(key, *value);
            }
            let store = builder
                .build()
                .map_err(|e| StateError::Root {
                    url: url.to_string(),
                    message: format!(
                        "{e}; set AWS_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT, AWS_ALLOW_HTTP=true for an S3-compatible server)"
                    ),
                })?;
            return Ok(Self {
                store: Arc::new(store),
                prefix: ObjectPath::from(prefix.trim_end_matches('/')),
                local_dir: None,
                url: url.to_string(),
            });
        }
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
        Ok(Self {
            store: Arc::new(store),
            prefix: ObjectPath::from(""),
            local_dir: Some(dir),
            url: url.to_string(),
        })
    }
}
