//! The control endpoint of a running job: plain HTTP, on 127.0.0.1 unless told
//! otherwise, found through `{state root}/{pipeline}/_control.json`.
//!
//! ```text
//!  GET  /                            → the web page (graph, rates, checkpoints, savepoints)
//!  GET  /metrics                     → Prometheus text: rows, watermarks, backpressure, checkpoints
//!  GET  /api/job                     → the graph with each operator's live numbers
//!  GET  /api/operators/{id}          → one operator, per subtask
//!  GET  /api/checkpoints             → this run's history, retained checkpoints, recovery records
//!  GET  /api/savepoints              → savepoints on storage
//!  POST /api/savepoints?label=L&stop=true&drain=true  → 200 {SavepointDone} | 409 {"error": …}
//!  GET  /health                      → 200 {"pipeline": …, "pid": …}
//! ```
//!
//! Reading is open on loopback; taking a savepoint or stopping needs the job's token
//! (`_control_token`, mode 0600 on a local root), and bound to any other address every
//! request needs it ([`access`]). A flood of connections cannot take the job down with
//! it: see [`Limits`].

pub mod access;
mod api;
mod exposition;
mod live;
mod outline;
mod page;
mod rates;
mod scrape;
mod serve;

pub use live::LiveMetrics;
pub use outline::{JobOutline, OutlineInput, OutlineOperator};
pub use serve::Limits;

use riffle_runtime::savepoint::{SavepointDone, SavepointSender};
use riffle_state::CheckpointStore;
use serde::{Deserialize, Serialize};
use serve::Served;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// `_control.json`: where a job serves its control endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlFile {
    /// `127.0.0.1:port`: where a client on this machine reaches it (for an endpoint
    /// bound to every address, its loopback address).
    pub address: String,
    /// The process serving it.
    pub pid: u32,
    /// The pipeline.
    pub pipeline: String,
}

/// A serving control endpoint; stops and removes its control file on [`stop`](Self::stop).
pub struct ControlServer {
    task: tokio::task::JoinHandle<()>,
    store: CheckpointStore,
    file: ControlFile,
    bound: SocketAddr,
    open: Arc<AtomicUsize>,
    token: String,
}

/// Where and how the control endpoint serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlOptions {
    /// The address to bind; port 0 picks a free one. Anything but loopback makes every
    /// request need the token.
    pub address: SocketAddr,
    /// How much of the process it may take.
    pub limits: Limits,
}

impl Default for ControlOptions {
    fn default() -> Self {
        Self {
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            limits: Limits::default(),
        }
    }
}

/// The address a local client connects to for an endpoint bound to `bound`.
fn local_address(bound: SocketAddr) -> SocketAddr {
    match bound.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::from(([127, 0, 0, 1], bound.port()))
        }
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, bound.port()))
        }
        _ => bound,
    }
}

impl ControlServer {
    /// Binds 127.0.0.1 on a free port, writes the control file and the token, and
    /// serves requests on the current runtime.
    ///
    /// # Errors
    /// The port cannot be bound or the control file written.
    pub async fn start(
        store: &CheckpointStore,
        pipeline: &str,
        savepoints: SavepointSender,
        live: Arc<LiveMetrics>,
    ) -> Result<Self, String> {
        Self::start_with(store, pipeline, savepoints, live, ControlOptions::default()).await
    }

    /// [`start`](Self::start) on another address or with other limits.
    ///
    /// # Errors
    /// As `start`.
    pub async fn start_with(
        store: &CheckpointStore,
        pipeline: &str,
        savepoints: SavepointSender,
        live: Arc<LiveMetrics>,
        options: ControlOptions,
    ) -> Result<Self, String> {
        let listener = TcpListener::bind(options.address).await.map_err(|e| {
            format!(
                "cannot bind the control endpoint on {}: {e}",
                options.address
            )
        })?;
        let bound = listener
            .local_addr()
            .map_err(|e| format!("control endpoint: {e}"))?;
        let token = access::new_token()?;
        store
            .write_control_token(&token)
            .await
            .map_err(|e| format!("writing the control token: {e}"))?;
        let file = ControlFile {
            address: local_address(bound).to_string(),
            pid: std::process::id(),
            pipeline: pipeline.to_string(),
        };
        let json = serde_json::to_vec_pretty(&file).unwrap_or_default();
        store
            .write_control(json)
            .await
            .map_err(|e| format!("writing the control file: {e}"))?;
        let served = Arc::new(Served {
            savepoints,
            health: serde_json::to_string(&file).unwrap_or_default(),
            live,
            pipeline: pipeline.to_string(),
            store: store.clone(),
            access: access::Access::new(token.clone(), bound),
            stored: api::StoredViews::default(),
        });
        let open = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn(serve::accept_loop(
            listener,
            served,
            options.limits,
            open.clone(),
        ));
        Ok(Self {
            task,
            store: store.clone(),
            file,
            bound,
            open,
            token,
        })
    }

    /// The address it is bound to (`0.0.0.0:8081`, say).
    pub fn bound(&self) -> SocketAddr {
        self.bound
    }

    /// The token requests present as `Authorization: Bearer <token>`.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The connections being served now (at most [`Limits::connections`]).
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// The address a client on this machine reaches it at.
    pub fn address(&self) -> &str {
        &self.file.address
    }

    /// Stops serving and removes the control file (if it is still this process's).
    pub async fn stop(self) {
        self.task.abort();
        if let Ok(Some(current)) = read_control_file(&self.store).await {
            if current == self.file {
                let _ = self.store.delete_control().await;
            }
        }
    }
}

/// Reads `_control.json`, if a job wrote one.
///
/// # Errors
/// Storage failures, or a file that is not a control file.
pub async fn read_control_file(store: &CheckpointStore) -> Result<Option<ControlFile>, String> {
    let Some(bytes) = store.read_control().await.map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| format!("the control file is damaged: {e}"))
}

/// Asks the job serving at `address` for a savepoint and waits up to `timeout`
/// (blocking; for the CLI).
///
/// # Errors
/// The job cannot be reached, or it answered with an error.
pub fn post_savepoint(
    address: &str,
    token: Option<&str>,
    label: Option<&str>,
    stop: bool,
    drain: bool,
    timeout: Duration,
) -> Result<SavepointDone, String> {
    let addr: SocketAddr = address
        .parse()
        .map_err(|e| format!("bad control address `{address}`: {e}"))?;
    if !addr.ip().is_loopback() {
        return Err(format!(
            "the control address {address} is not on loopback; refusing to connect"
        ));
    }
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("cannot reach the job at {address}: {e}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let mut query = format!("stop={stop}&drain={drain}");
    if let Some(label) = label {
        query.push_str(&format!("&label={label}"));
    }
    let authorization = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let request = format!(
        "POST /api/savepoints?{query} HTTP/1.1\r\nHost: {address}\r\n{authorization}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("sending to {address}: {e}"))?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| format!("waiting for the savepoint ({timeout:?}): {e}"))?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("a malformed answer from {address}"))?;
    if head.starts_with("HTTP/1.1 200") {
        serde_json::from_str(body).map_err(|e| format!("a malformed answer from {address}: {e}"))
    } else {
        #[derive(Deserialize)]
        struct Failure {
            error: String,
        }
        Err(serde_json::from_str::<Failure>(body)
            .map(|f| f.error)
            .unwrap_or_else(|_| body.to_string()))
    }
}
