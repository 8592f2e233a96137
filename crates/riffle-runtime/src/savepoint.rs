//! Savepoint requests: how a running job is asked for a savepoint (by the control
//! endpoint, a signal, or a test) and what it answers.

use riffle_core::Epoch;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::sync::{oneshot, Mutex};

/// One request for a savepoint.
#[derive(Debug)]
pub struct SavepointRequest {
    /// The label (`savepoints/{label}/`); default `sp-{epoch:06}`.
    pub label: Option<String>,
    /// Stop the job after the savepoint (sources end right after the barrier).
    pub stop: bool,
    /// With `stop`: sources first emit the final watermark, so every open window fires
    /// and its output is committed with the savepoint.
    pub drain: bool,
    /// Where the answer goes.
    pub reply: oneshot::Sender<Result<SavepointDone, String>>,
}

/// A completed savepoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavepointDone {
    /// Its label.
    pub label: String,
    /// The epoch it was taken at (committed like a checkpoint).
    pub epoch: Epoch,
    /// State files in the savepoint.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// From the request to the savepoint's manifest, in milliseconds.
    pub duration_ms: u64,
    /// Whether the job stops after it.
    pub stopped: bool,
    /// Where it is: `{state root}/{pipeline}/savepoints/{label}`.
    pub location: String,
}

/// The sending side: cloned by whoever may ask (control endpoint, signal handler).
pub type SavepointSender = UnboundedSender<SavepointRequest>;

/// The receiving side, shared by the attempts of a run (each attempt's coordinator
/// holds the lock while it runs).
pub type SavepointRequests = Arc<Mutex<UnboundedReceiver<SavepointRequest>>>;

/// A new request channel.
pub fn savepoint_channel() -> (SavepointSender, SavepointRequests) {
    let (tx, rx) = mpsc::unbounded_channel();
    (tx, Arc::new(Mutex::new(rx)))
}

/// Asks for a savepoint through `sender` and waits for the answer.
///
/// # Errors
/// The job is gone, or the savepoint failed (with the reason).
pub async fn request_savepoint(
    sender: &SavepointSender,
    label: Option<String>,
    stop: bool,
    drain: bool,
) -> Result<SavepointDone, String> {
    let (reply, answer) = oneshot::channel();
    sender
        .send(SavepointRequest {
            label,
            stop,
            drain,
            reply,
        })
        .map_err(|_| "the job is no longer running".to_string())?;
    answer
        .await
        .map_err(|_| "the job ended before the savepoint completed".to_string())?
}
