//! Checkpoint events for metrics, the progress line and tests.

use riffle_core::Epoch;
use std::time::Duration;

/// What happened to a checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckpointEvent {
    /// Barriers for `epoch` were injected at every source.
    Started { epoch: Epoch, end_of_input: bool },
    /// A task acknowledged `epoch` (its state is on storage).
    Acked {
        epoch: Epoch,
        acks: usize,
        tasks: usize,
    },
    /// `epoch` is COMMITTED: its state is durable and its sink output published.
    Completed {
        epoch: Epoch,
        duration: Duration,
        bytes: u64,
        alignment: Duration,
    },
    /// `epoch` failed (timeout, storage, sink commit); `consecutive` failures so far.
    Failed {
        epoch: Epoch,
        reason: String,
        consecutive: usize,
    },
    /// A committed epoch was promoted to a savepoint.
    Savepoint(crate::savepoint::SavepointDone),
}

/// Receives checkpoint events from the coordinator (called on its task: keep it quick).
pub trait CheckpointListener: Send + Sync {
    /// One event.
    fn on_event(&self, event: &CheckpointEvent);
}

/// Records every event (tests, tools).
#[derive(Debug, Default)]
pub struct RecordingListener {
    events: std::sync::Mutex<Vec<CheckpointEvent>>,
}

impl RecordingListener {
    /// Events so far, in order.
    pub fn events(&self) -> Vec<CheckpointEvent> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl CheckpointListener for RecordingListener {
    fn on_event(&self, event: &CheckpointEvent) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event.clone());
    }
}
