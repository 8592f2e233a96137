//! How rows move from the subtasks of one operator to those of the next.

use crate::metrics::FlowCounters;
use crate::protocol::ChainOrCancel;
use riffle_core::arrow::array::UInt32Array;
use riffle_core::arrow::compute::take_record_batch;
use riffle_core::{KeyGroup, KeyHasher, Message, RecordBatch, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::mpsc::Sender;

/// The routing on one edge of the graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exchange {
    /// Subtask `i` sends to subtask `i` (equal parallelism).
    Forward,
    /// Rows go to the subtask owning their key's key group.
    Keyed(Vec<usize>),
    /// Every row goes to every subtask.
    Broadcast,
    /// Batches are dealt to subtasks in turn.
    RoundRobin,
}

impl Exchange {
    /// Short name for `explain`.
    pub fn name(&self) -> &'static str {
        match self {
            Exchange::Forward => "forward",
            Exchange::Keyed(_) => "keyed",
            Exchange::Broadcast => "broadcast",
            Exchange::RoundRobin => "round-robin",
        }
    }
}

/// The channel was closed by the receiver: the job is shutting down.
#[derive(Debug)]
pub struct Disconnected;

impl From<Disconnected> for ChainOrCancel {
    fn from(_: Disconnected) -> Self {
        ChainOrCancel::Cancelled
    }
}

/// Sends a task's output over one edge, applying its exchange.
pub struct OutputRouter {
    exchange: Exchange,
    senders: Vec<Sender<Message>>,
    max_parallelism: u16,
    hasher: KeyHasher,
    next: usize,
    rows_by_target: Vec<Vec<u32>>,
    /// Where time blocked on a full channel is counted (the sending operator's).
    blocked: Option<Arc<FlowCounters>>,
}

impl OutputRouter {
    /// A router over `senders`, indexed by downstream subtask (one for forward).
    pub fn new(exchange: Exchange, senders: Vec<Sender<Message>>, max_parallelism: u16) -> Self {
        let targets = senders.len();
        Self {
            exchange,
            senders,
            max_parallelism,
            hasher: KeyHasher::default(),
            next: 0,
            rows_by_target: vec![Vec::new(); targets],
            blocked: None,
        }
    }

    /// Counts the time this router waits on full channels into `flow` (backpressure).
    pub fn count_blocked_into(&mut self, flow: Arc<FlowCounters>) {
        self.blocked = Some(flow);
    }

    /// Routes a data batch.
    ///
    /// # Errors
    /// `Ok(Err(Disconnected))` when the receiver is gone; `Err` when keys cannot be hashed.
    pub async fn send_batch(
        &mut self,
        batch: RecordBatch,
    ) -> Result<std::result::Result<(), Disconnected>> {
        if batch.num_rows() == 0 {
            return Ok(Ok(()));
        }
        let targets = self.senders.len();
        match &self.exchange {
            Exchange::Forward => Ok(send(
                self.blocked.as_deref(),
                &self.senders[0],
                Message::Data(batch),
            )
            .await),
            Exchange::Broadcast => {
                for s in &self.senders {
                    if send(self.blocked.as_deref(), s, Message::Data(batch.clone()))
                        .await
                        .is_err()
                    {
                        return Ok(Err(Disconnected));
                    }
                }
                Ok(Ok(()))
            }
            Exchange::RoundRobin => {
                let target = self.next % targets;
                self.next = self.next.wrapping_add(1);
                Ok(send(
                    self.blocked.as_deref(),
                    &self.senders[target],
                    Message::Data(batch),
                )
                .await)
            }
            Exchange::Keyed(_) if targets == 1 => Ok(send(
                self.blocked.as_deref(),
                &self.senders[0],
                Message::Data(batch),
            )
            .await),
            Exchange::Keyed(key_columns) => {
                let columns: Vec<_> = key_columns
                    .iter()
                    .map(|&i| batch.column(i).clone())
                    .collect();
                let hashes = self.hasher.hash_rows(&columns, batch.num_rows())?;
                for rows in &mut self.rows_by_target {
                    rows.clear();
                }
                for (row, hash) in hashes.iter().enumerate() {
                    let target = KeyGroup::of_hash(*hash, self.max_parallelism)
                        .subtask(targets, self.max_parallelism);
                    self.rows_by_target[target].push(row as u32);
                }
                for target in 0..targets {
                    let rows = &self.rows_by_target[target];
                    if rows.is_empty() {
                        continue;
                    }
                    let part = if rows.len() == batch.num_rows() {
                        batch.clone()
                    } else {
                        let indices = UInt32Array::from(rows.clone());
                        take_record_batch(&batch, &indices)?
                    };
                    if send(
                        self.blocked.as_deref(),
                        &self.senders[target],
                        Message::Data(part),
                    )
                    .await
                    .is_err()
                    {
                        return Ok(Err(Disconnected));
                    }
                }
                Ok(Ok(()))
            }
        }
    }

    /// Sends a control message (watermark, barrier, end) to every downstream subtask.
    pub async fn broadcast(&self, message: Message) -> std::result::Result<(), Disconnected> {
        for s in &self.senders {
            send(self.blocked.as_deref(), s, message.clone()).await?;
        }
        Ok(())
    }
}

/// Sends `message`; when the channel is full, the wait is counted into `blocked`.
async fn send(
    blocked: Option<&FlowCounters>,
    sender: &Sender<Message>,
    message: Message,
) -> std::result::Result<(), Disconnected> {
    match sender.try_send(message) {
        Ok(()) => Ok(()),
        Err(TrySendError::Closed(_)) => Err(Disconnected),
        Err(TrySendError::Full(message)) => {
            let waiting = Instant::now();
            let sent = sender.send(message).await.map_err(|_| Disconnected);
            if let Some(flow) = blocked {
                let nanos = u64::try_from(waiting.elapsed().as_nanos()).unwrap_or(u64::MAX);
                flow.blocked_nanos.fetch_add(nanos, Ordering::Relaxed);
            }
            sent
        }
    }
}
