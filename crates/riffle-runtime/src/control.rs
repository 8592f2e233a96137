//! The control endpoint of a running job: plain HTTP on 127.0.0.1, found through
//! `{state root}/{pipeline}/_control.json`.
//!
//! ```text
//!  POST /savepoint?label=L&stop=true&drain=true   → 200 {SavepointDone} | 409 {"error": …}
//!  GET  /metrics                                  → 200 rows, watermark, checkpoints, operators
//!  GET  /health                                   → 200 {"pipeline": …, "pid": …}
//! ```
//!
//! Only loopback is bound: whoever can reach it can stop the job, like whoever can send
//! it a signal.

use crate::checkpoint_events::{CheckpointEvent, CheckpointListener};
use crate::metrics::JobMetrics;
use crate::savepoint::{request_savepoint, SavepointDone, SavepointSender};
use riffle_state::CheckpointStore;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// `_control.json`: where a job serves its control endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlFile {
    /// `127.0.0.1:port`.
    pub address: String,
    /// The process serving it.
    pub pid: u32,
    /// The pipeline.
    pub pipeline: String,
}

/// What `GET /metrics` reports: the running attempt's counters (set when it starts) and
/// the checkpoint events so far. Register it as a checkpoint listener.
#[derive(Debug, Default)]
pub struct LiveMetrics {
    job: Mutex<Option<Arc<JobMetrics>>>,
    checkpoints: Mutex<CheckpointTally>,
}

#[derive(Debug, Default, Serialize)]
struct CheckpointTally {
    committed: u64,
    failed: u64,
    last_epoch: Option<u64>,
    last_duration_ms: Option<u64>,
    last_bytes: Option<u64>,
    last_failure: Option<String>,
    savepoints: Vec<String>,
}

impl LiveMetrics {
    /// The attempt that is running now.
    pub fn set_job(&self, metrics: Arc<JobMetrics>) {
        *self.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(metrics);
    }

    /// The report as JSON.
    fn json(&self, pipeline: &str) -> String {
        let job = self.job.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let checkpoints = self.checkpoints.lock().unwrap_or_else(|e| e.into_inner());
        let mut report = serde_json::json!({ "pipeline": pipeline, "checkpoints": &*checkpoints });
        if let Some(m) = job {
            let max_event_time = m.source_max_event_time.load(Ordering::Relaxed);
            report["source_rows"] = m.source_rows.load(Ordering::Relaxed).into();
            report["sink_rows"] = m.sink_rows.load(Ordering::Relaxed).into();
            report["source_max_event_time"] =
                (max_event_time > i64::MIN).then_some(max_event_time).into();
            report["sink_watermark"] = m.sink_watermark().into();
            report["operators"] = m
                .operator_totals()
                .iter()
                .map(|o| {
                    serde_json::json!({
                        "operator": o.operator.0,
                        "late_rows_dropped": o.late_rows_dropped,
                        "windows_emitted": o.windows_emitted,
                        "records_skipped": o.records_skipped,
                    })
                })
                .collect();
        }
        report.to_string()
    }
}

impl CheckpointListener for LiveMetrics {
    fn on_event(&self, event: &CheckpointEvent) {
        let mut tally = self.checkpoints.lock().unwrap_or_else(|e| e.into_inner());
        match event {
            CheckpointEvent::Completed {
                epoch,
                duration,
                bytes,
                ..
            } => {
                tally.committed += 1;
                tally.last_epoch = Some(epoch.0);
                tally.last_duration_ms = Some(duration.as_millis() as u64);
                tally.last_bytes = Some(*bytes);
            }
            CheckpointEvent::Failed { reason, .. } => {
                tally.failed += 1;
                tally.last_failure = Some(reason.clone());
            }
            CheckpointEvent::Savepoint(done) => tally.savepoints.push(done.label.clone()),
            CheckpointEvent::Started { .. } | CheckpointEvent::Acked { .. } => {}
        }
    }
}

/// A serving control endpoint; stops and removes its control file on [`stop`](Self::stop).
pub struct ControlServer {
    task: tokio::task::JoinHandle<()>,
    store: CheckpointStore,
    file: ControlFile,
}

impl ControlServer {
    /// Binds 127.0.0.1 on a free port, writes the control file and serves requests on
    /// the current runtime.
    ///
    /// # Errors
    /// The port cannot be bound or the control file written.
    pub async fn start(
        store: &CheckpointStore,
        pipeline: &str,
        savepoints: SavepointSender,
        live: Arc<LiveMetrics>,
    ) -> Result<Self, String> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("cannot bind the control endpoint on 127.0.0.1: {e}"))?;
        let address = listener
            .local_addr()
            .map_err(|e| format!("control endpoint: {e}"))?;
        let file = ControlFile {
            address: address.to_string(),
            pid: std::process::id(),
            pipeline: pipeline.to_string(),
        };
        let json = serde_json::to_vec_pretty(&file).unwrap_or_default();
        store
            .write_control(json)
            .await
            .map_err(|e| format!("writing the control file: {e}"))?;
        let health = serde_json::to_string(&file).unwrap_or_default();
        let pipeline = pipeline.to_string();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = Served {
                    savepoints: savepoints.clone(),
                    health: health.clone(),
                    live: live.clone(),
                    pipeline: pipeline.clone(),
                };
                tokio::spawn(serve(stream, state));
            }
        });
        Ok(Self {
            task,
            store: store.clone(),
            file,
        })
    }

    /// The address it serves on.
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

/// What one connection is served from.
struct Served {
    savepoints: SavepointSender,
    health: String,
    live: Arc<LiveMetrics>,
    pipeline: String,
}

async fn serve(mut stream: tokio::net::TcpStream, state: Served) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head);
    let mut parts = text.lines().next().unwrap_or_default().split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let param = |name: &str| {
        query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    };
    let (status, body) = match (method, path) {
        ("GET", "/health") => ("200 OK", state.health),
        ("GET", "/metrics") => ("200 OK", state.live.json(&state.pipeline)),
        ("POST", "/savepoint") => {
            let flag = |name: &str| param(name).is_some_and(|v| v == "true" || v == "1");
            let label = param("label").filter(|l| !l.is_empty());
            match request_savepoint(&state.savepoints, label, flag("stop"), flag("drain")).await {
                Ok(done) => ("200 OK", serde_json::to_string(&done).unwrap_or_default()),
                Err(e) => ("409 Conflict", serde_json::json!({ "error": e }).to_string()),
            }
        }
        _ => (
            "404 Not Found",
            serde_json::json!({"error": "use POST /savepoint?label=L&stop=true&drain=true, GET /metrics or GET /health"})
                .to_string(),
        ),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Asks the job serving at `address` for a savepoint and waits up to `timeout`
/// (blocking; for the CLI).
///
/// # Errors
/// The job cannot be reached, or it answered with an error.
pub fn post_savepoint(
    address: &str,
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
    let request = format!(
        "POST /savepoint?{query} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
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
