//! A started job: waiting for it, injecting barriers, and stopping it from outside.

use crate::error::{RuntimeError, RuntimeResult};
use crate::metrics::{JobMetrics, OperatorTotals};
use crate::placement::RemoteEnds;
use crate::protocol::{ChainOrCancel, SnapshotAck, TaskExit, TaskOutcome, TaskSignal};
use riffle_core::{Barrier, OperatorId, SinkSummary};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::task::JoinSet;

/// Injects barriers at every source subtask of a running job.
#[derive(Clone)]
pub struct BarrierInjector {
    pub(crate) senders: Vec<UnboundedSender<Barrier>>,
}

impl BarrierInjector {
    /// Sends `barrier` to every source subtask, which emits it between two batches.
    pub fn inject(&self, barrier: Barrier) {
        for s in &self.senders {
            // A source that already ended ignores barriers; its downstream counts it aligned.
            let _ = s.send(barrier);
        }
    }
}

/// Fails a running job from outside its tasks (the coordinator, after too many failed
/// checkpoints): [`JobHandle::wait`] aborts every task and returns the message.
#[derive(Clone)]
pub struct JobStopper {
    pub(crate) sender: UnboundedSender<RuntimeError>,
}

impl JobStopper {
    /// Stops the job with `message` as its (checkpoint) error.
    pub fn fail(&self, message: String) {
        let _ = self.sender.send(RuntimeError::transient(message));
    }

    /// Stops the job with `error`, typed as it is (a fenced run must not restart).
    pub fn fail_with(&self, error: RuntimeError) {
        let _ = self.sender.send(error);
    }
}

/// What a finished job did.
#[derive(Debug, Clone, Default)]
pub struct JobSummary {
    /// Wall time from start to the last task's end.
    pub elapsed: Duration,
    /// Rows read by sources.
    pub source_rows: u64,
    /// Rows written by sinks.
    pub sink_rows: u64,
    /// Per sink subtask, what it wrote.
    pub sinks: Vec<(OperatorId, SinkSummary)>,
    /// Per operator, late rows and windows.
    pub operators: Vec<OperatorTotals>,
}

impl JobSummary {
    /// Late rows dropped over all operators.
    pub fn late_rows_dropped(&self) -> u64 {
        self.operators.iter().map(|o| o.late_rows_dropped).sum()
    }

    /// Malformed source records skipped over all sources.
    pub fn records_skipped(&self) -> u64 {
        self.operators.iter().map(|o| o.records_skipped).sum()
    }
}

/// A started job: its metrics, a way to inject barriers, and its result.
pub struct JobHandle {
    /// Live counters.
    pub metrics: Arc<JobMetrics>,
    pub(crate) barrier_senders: Vec<UnboundedSender<Barrier>>,
    /// Snapshot acknowledgements, when requested at start.
    pub acks: Option<UnboundedReceiver<SnapshotAck>>,
    /// With [`JobConfig::exactly_once`], what tasks tell the coordinator: each that it
    /// restored, each source subtask that reached the end of its input and waits for
    /// the end-of-input barrier.
    pub task_signals: Option<UnboundedReceiver<TaskSignal>>,
    /// Channels with one end on another worker (none in a single process).
    pub remote: RemoteEnds,
    /// Tasks of the whole job, over every worker: the acks each checkpoint needs.
    pub(crate) job_tasks: usize,
    /// Source subtasks of the whole job, over every worker: the ends of input the
    /// coordinator waits for.
    pub(crate) job_sources: usize,
    /// On a job spread over workers: where other workers' acks and task signals join
    /// this process's (taken once, by the cluster layer).
    pub(crate) ack_sender: Option<UnboundedSender<SnapshotAck>>,
    pub(crate) signal_sender: Option<UnboundedSender<TaskSignal>>,
    pub(crate) tasks: JoinSet<(usize, TaskOutcome<TaskExit>)>,
    pub(crate) stop_tx: UnboundedSender<RuntimeError>,
    pub(crate) stop_rx: UnboundedReceiver<RuntimeError>,
    pub(crate) task_names: Vec<(OperatorId, usize)>,
    pub(crate) task_ids: HashMap<tokio::task::Id, usize>,
    pub(crate) started: Instant,
    /// Where this process's subtasks note the chains they continue from the restored
    /// checkpoint: taken by the writer of their acks, which references those files.
    pub restored_chains: Option<crate::restored_chains::RestoredChains>,
}

impl JobHandle {
    /// Number of tasks (subtasks of chains) this process runs.
    pub fn task_count(&self) -> usize {
        self.task_names.len()
    }

    /// Of a job spread over workers: senders into this process's ack and task signal
    /// channels, for acks and signals of other workers' tasks (worker 0). The
    /// coordinator ends once every sender is gone, so the caller drops them when the
    /// remote tasks end.
    pub fn take_remote_inputs(
        &mut self,
    ) -> (
        Option<UnboundedSender<SnapshotAck>>,
        Option<UnboundedSender<TaskSignal>>,
    ) {
        (self.ack_sender.take(), self.signal_sender.take())
    }

    /// A handle that fails the job while [`wait`](Self::wait) runs.
    pub fn stopper(&self) -> JobStopper {
        JobStopper {
            sender: self.stop_tx.clone(),
        }
    }

    /// Injects `barrier` at every source subtask (between two batches).
    pub fn inject_barrier(&self, barrier: Barrier) {
        self.barrier_injector().inject(barrier);
    }

    /// A cloneable handle that injects barriers while [`wait`](Self::wait) runs.
    pub fn barrier_injector(&self) -> BarrierInjector {
        BarrierInjector {
            senders: self.barrier_senders.clone(),
        }
    }

    /// Waits for every task; the first failure aborts the rest and is returned.
    ///
    /// # Errors
    /// The failing operator and subtask with its cause, or a panic.
    pub async fn wait(mut self) -> RuntimeResult<JobSummary> {
        let mut sinks = Vec::new();
        let mut cancelled = None;
        loop {
            let joined = tokio::select! {
                joined = self.tasks.join_next_with_id() => joined,
                Some(error) = self.stop_rx.recv() => {
                    self.tasks.abort_all();
                    return Err(error);
                }
            };
            let Some(joined) = joined else { break };
            let (index, outcome) = match joined {
                Ok((_, done)) => done,
                Err(e) => {
                    self.tasks.abort_all();
                    let task = match self.task_ids.get(&e.id()) {
                        Some(&i) => format!("{}[{}]", self.task_names[i].0, self.task_names[i].1),
                        None => "unknown".into(),
                    };
                    let message = match e.try_into_panic() {
                        Ok(payload) => panic_message(payload),
                        Err(e) => e.to_string(),
                    };
                    return Err(RuntimeError::Panic { task, message });
                }
            };
            match outcome {
                Ok(exit) => sinks.extend(exit.sink),
                Err(ChainOrCancel::Failed(failure)) => {
                    self.tasks.abort_all();
                    let (_, subtask) = &self.task_names[index];
                    return Err(RuntimeError::Task {
                        operator: failure.operator,
                        subtask: *subtask,
                        source: failure.error,
                    });
                }
                Err(ChainOrCancel::Protocol(source)) => {
                    self.tasks.abort_all();
                    let (name, subtask) = &self.task_names[index];
                    return Err(RuntimeError::Protocol {
                        task: format!("{name}[{subtask}]"),
                        source,
                    });
                }
                Err(ChainOrCancel::Cancelled) => cancelled = Some(index),
            }
        }
        if let Some(index) = cancelled {
            // Every task ended, yet one saw a neighbour vanish: that neighbour panicked
            // or was dropped without reporting. Treat it as a bug rather than success.
            let (name, subtask) = &self.task_names[index];
            return Err(RuntimeError::Panic {
                task: format!("{name}[{subtask}]"),
                message: "a channel closed without end of stream".into(),
            });
        }
        Ok(JobSummary {
            elapsed: self.started.elapsed(),
            source_rows: self
                .metrics
                .source_rows
                .load(std::sync::atomic::Ordering::Relaxed),
            sink_rows: self
                .metrics
                .sink_rows
                .load(std::sync::atomic::Ordering::Relaxed),
            sinks,
            operators: self.metrics.operator_totals(),
        })
    }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".into()
    }
}
