//! The control endpoint of a running job: HTTP on 127.0.0.1 unless told otherwise
//! (HTTPS when bound beyond loopback), found through `{state root}/{pipeline}/_control.json`
//! (`_control/worker-{n}.json` for each worker of a job on several).
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
//! (`_control_token`, mode 0600 on a local root; one per job, which every worker
//! accepts), and bound to any other address every request needs it ([`access`]). A flood of connections cannot take the job down with
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
pub mod this_machine;
pub mod tls;

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
    /// Which worker serves it, for a job on several workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<usize>,
    /// The host it runs on: `address` reaches it only from there.
    #[serde(default)]
    pub host: String,
}

/// A serving control endpoint; stops and removes its control file on [`stop`](Self::stop).
pub struct ControlServer {
    task: tokio::task::JoinHandle<()>,
    store: CheckpointStore,
    file: ControlFile,
    bound: SocketAddr,
    open: Arc<AtomicUsize>,
    token: String,
    https: bool,
}

/// Where and how the control endpoint serves.
#[derive(Debug, Clone)]
pub struct ControlOptions {
    /// The address to bind; port 0 picks a free one. Anything but loopback makes every
    /// request need the token, and HTTPS ([`tls`](Self::tls)) unless
    /// [`plain_http_beyond_loopback`](Self::plain_http_beyond_loopback).
    pub address: SocketAddr,
    /// How much of the process it may take.
    pub limits: Limits,
    /// Which worker of a job on several serves it (its record is then
    /// `_control/worker-{n}.json`, and its metrics are labelled `worker`).
    pub worker: Option<usize>,
    /// HTTPS: the certificate and key to serve with.
    pub tls: Option<tls::ServerTls>,
    /// Plain HTTP on an address beyond loopback (a network the operator trusts).
    pub plain_http_beyond_loopback: bool,
}

impl Default for ControlOptions {
    fn default() -> Self {
        Self {
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            limits: Limits::default(),
            worker: None,
            tls: None,
            plain_http_beyond_loopback: false,
        }
    }
}

/// Why a control endpoint did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Bound beyond loopback with neither TLS nor leave to serve plain HTTP.
    #[error("the control endpoint on {0} would be open to the network over plain HTTP, where the job's token and its answers travel readable: give --http-tls-cert and --http-tls-key (a worker uses its --tls-cert and --tls-key), or --http-insecure on a network you trust")]
    PlainHttpBeyondLoopback(SocketAddr),
    /// The address cannot be bound.
    #[error("cannot bind the control endpoint on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No token could be drawn.
    #[error("{0}")]
    Token(String),
    /// The state root refused the token or the control record.
    #[error("writing the control {what}: {source}")]
    Store {
        /// `token` or `record`.
        what: &'static str,
        /// Why.
        #[source]
        source: riffle_state::StateError,
    },
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
    ) -> Result<Self, StartError> {
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
    ) -> Result<Self, StartError> {
        let beyond_loopback = !options.address.ip().is_loopback();
        if beyond_loopback && options.tls.is_none() && !options.plain_http_beyond_loopback {
            return Err(StartError::PlainHttpBeyondLoopback(options.address));
        }
        let bind = |source| StartError::Bind {
            address: options.address,
            source,
        };
        let listener = TcpListener::bind(options.address).await.map_err(bind)?;
        let bound = listener.local_addr().map_err(bind)?;
        let token = store
            .job_token(&access::new_token().map_err(StartError::Token)?)
            .await
            .map_err(|source| StartError::Store {
                what: "token",
                source,
            })?;
        let file = ControlFile {
            address: local_address(bound).to_string(),
            pid: std::process::id(),
            pipeline: pipeline.to_string(),
            worker: options.worker,
            host: this_machine::host_name(),
        };
        let json = serde_json::to_vec_pretty(&file).unwrap_or_default();
        store
            .write_control(options.worker, json)
            .await
            .map_err(|source| StartError::Store {
                what: "record",
                source,
            })?;
        let served = Arc::new(Served {
            savepoints,
            health: serde_json::to_string(&file).unwrap_or_default(),
            live,
            pipeline: pipeline.to_string(),
            store: store.clone(),
            access: access::Access::new(token.clone(), bound),
            stored: api::StoredViews::default(),
            worker: options.worker,
        });
        let open = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn(serve::accept_loop(
            listener,
            served,
            options.limits,
            options.tls.as_ref().map(tls::ServerTls::acceptor),
            open.clone(),
        ));
        Ok(Self {
            task,
            store: store.clone(),
            file,
            bound,
            open,
            token,
            https: options.tls.is_some(),
        })
    }

    /// `https` when it serves TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.https {
            "https"
        } else {
            "http"
        }
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
        let worker = self.file.worker;
        if let Ok(Some(current)) = read_control_file(&self.store, worker).await {
            if current == self.file {
                let _ = self.store.delete_control(worker).await;
            }
        }
    }
}

/// Reads the control record of a job in one process (`worker` `None`) or of one of its
/// workers, if there is one.
///
/// # Errors
/// Storage failures, or a file that is not a control file.
pub async fn read_control_file(
    store: &CheckpointStore,
    worker: Option<usize>,
) -> Result<Option<ControlFile>, String> {
    let Some(bytes) = store
        .read_control(worker)
        .await
        .map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| format!("the control file is damaged: {e}"))
}

/// The control record a client on this machine talks to: the job's in one process;
/// else that of the job's lowest worker running on this host (every worker passes a
/// savepoint request on to worker 0). A record of this host whose process is gone (a
/// job killed with -9) is passed over: whatever listens on its port now must not get
/// the job's token.
///
/// # Errors
/// Storage failures, a damaged record, a record left by a process that is gone, or
/// workers that all run on other hosts (the error names them).
pub async fn find_control(store: &CheckpointStore) -> Result<Option<ControlFile>, String> {
    let host = this_machine::host_name();
    let alive = this_machine::process_alive;
    if let Some(file) = read_control_file(store, None).await? {
        let here = file.host.is_empty() || file.host == host;
        if here && !alive(file.pid) {
            return Err(format!(
                "_control.json names process {}, which is gone: the job did not exit cleanly and is not running",
                file.pid
            ));
        }
        return Ok(Some(file));
    }
    let mut records = Vec::new();
    for worker in store.control_workers().await.map_err(|e| e.to_string())? {
        if let Some(record) = read_control_file(store, Some(worker)).await? {
            records.push(record);
        }
    }
    nearest_worker(records, &host, alive)
}

/// Of the workers' records, the lowest worker's on `host` whose process is `alive`.
fn nearest_worker(
    records: Vec<ControlFile>,
    host: &str,
    alive: impl Fn(u32) -> bool,
) -> Result<Option<ControlFile>, String> {
    let records: Vec<ControlFile> = records
        .into_iter()
        .filter(|r| r.host != host || alive(r.pid))
        .collect();
    if records.is_empty() {
        return Ok(None);
    }
    let elsewhere: Vec<String> = records
        .iter()
        .map(|r| format!("worker {} on {}", r.worker.unwrap_or(0), r.host))
        .collect();
    records
        .into_iter()
        .filter(|r| r.host == host)
        .min_by_key(|r| r.worker)
        .map(Some)
        .ok_or_else(|| {
            format!(
                "no worker of this job runs on this host ({host}): {}; run the command on one of them (e.g. `kubectl exec`)",
                elsewhere.join(", ")
            )
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn record(worker: usize, host: &str) -> ControlFile {
        ControlFile {
            address: format!("127.0.0.1:{}", 8000 + worker),
            pid: 1,
            pipeline: "p".into(),
            worker: Some(worker),
            host: host.into(),
        }
    }

    #[test]
    fn a_client_talks_to_the_lowest_worker_on_its_own_host() {
        let records = vec![record(2, "b"), record(1, "a"), record(3, "a")];
        assert_eq!(
            nearest_worker(records, "a", |_| true).unwrap(),
            Some(record(1, "a"))
        );
    }

    #[test]
    fn a_record_whose_process_is_gone_is_passed_over() {
        let mut dead = record(0, "a");
        dead.pid = 7;
        let records = vec![dead, record(1, "a")];
        assert_eq!(
            nearest_worker(records, "a", |pid| pid != 7).unwrap(),
            Some(record(1, "a"))
        );
    }

    #[test]
    fn workers_all_on_other_hosts_are_named() {
        let error = nearest_worker(
            vec![record(0, "riffle-0"), record(1, "riffle-1")],
            "laptop",
            |_| false,
        )
        .unwrap_err();
        assert!(
            error.contains("worker 0 on riffle-0") && error.contains("worker 1 on riffle-1"),
            "{error}"
        );
    }

    #[test]
    fn no_records_is_no_running_job() {
        assert_eq!(nearest_worker(Vec::new(), "a", |_| true).unwrap(), None);
    }
}
