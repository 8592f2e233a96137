//! The transactions of an exactly-once Kafka sink: a small pool of transactional
//! producers shared by the sink's subtasks, one open transaction per epoch of the run,
//! committed (with the ledger entry) when the epoch's checkpoint commits.

use super::ledger::Ledger;
use super::producer::{DeliveryContext, KafkaProducer, FLUSH_TIMEOUT};
use super::sink::KafkaSinkConfig;
use rdkafka::error::KafkaError;
use rdkafka::producer::Producer;
use riffle_core::{Epoch, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

/// The open transactions of one exactly-once sink.
pub(super) struct Transactions {
    config: Arc<KafkaSinkConfig>,
    pub(super) ledger: Ledger,
    /// Names this process's transactions apart from other runs'.
    run: String,
    state: Mutex<TransactionState>,
}

#[derive(Default)]
struct TransactionState {
    producers: Vec<Arc<KafkaProducer>>,
    idle: Vec<usize>,
    /// Open transactions by their index in this run (the k-th epoch).
    open: BTreeMap<u64, OpenTransaction>,
    /// Epochs committed by this process (recent ones).
    committed: BTreeSet<Epoch>,
}

struct OpenTransaction {
    producer: usize,
    /// The name in every record's `riffle.transaction` header.
    name: String,
    /// Set by the first subtask to reach the barrier that ends it.
    epoch: Option<Epoch>,
}

impl Transactions {
    pub(super) fn open(config: Arc<KafkaSinkConfig>) -> Result<Self> {
        let ledger = Ledger::open(&config.client, &config.topic, &config.label)?;
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let t = Self {
            config,
            ledger,
            run: format!("{started:x}-{}", std::process::id()),
            state: Mutex::new(TransactionState::default()),
        };
        {
            // Two producers cover a checkpoint in flight while the next epoch writes.
            let mut state = t.lock()?;
            for _ in 0..2 {
                let n = t.new_producer(&mut state)?;
                state.idle.push(n);
            }
            state.idle.reverse();
        }
        Ok(t)
    }

    fn lock(&self) -> Result<MutexGuard<'_, TransactionState>> {
        self.state
            .lock()
            .map_err(|_| self.config.client.error("lock poisoned"))
    }

    /// A new transactional producer; `init_transactions` fences any older one with its
    /// id and aborts what it left open.
    fn new_producer(&self, state: &mut TransactionState) -> Result<usize> {
        let n = state.producers.len();
        let id = self.config.transactional_id(n);
        let producer: KafkaProducer = self
            .config
            .client
            .config()
            .set("transactional.id", &id)
            .set(
                "transaction.timeout.ms",
                self.config.transaction_timeout.as_millis().to_string(),
            )
            .create_with_context(DeliveryContext::default())
            .map_err(|e| {
                self.config
                    .client
                    .error(format!("cannot create producer `{id}`: {e}"))
            })?;
        producer.init_transactions(FLUSH_TIMEOUT).map_err(|e| {
            self.config.client.error(format!(
                "cannot start transactions for `{id}`: {e}; use 'sink.delivery' = 'at-least-once' for brokers without transactions"
            ))
        })?;
        state.producers.push(Arc::new(producer));
        Ok(n)
    }

    /// The producer and name of transaction `k`, beginning it if it is not open yet.
    pub(super) fn producer_for(&self, k: u64) -> Result<(Arc<KafkaProducer>, String)> {
        let mut state = self.lock()?;
        if let Some(open) = state.open.get(&k) {
            return Ok((state.producers[open.producer].clone(), open.name.clone()));
        }
        let n = match state.idle.pop() {
            Some(n) => n,
            // Every producer holds a transaction still waiting for its checkpoint.
            None => self.new_producer(&mut state)?,
        };
        let producer = state.producers[n].clone();
        producer.context().new_transaction();
        producer.begin_transaction().map_err(|e| {
            self.config
                .client
                .error(format!("cannot begin a transaction: {e}"))
        })?;
        let name = format!("{}/{}/{k}", self.config.transactional_id(n), self.run);
        state.open.insert(
            k,
            OpenTransaction {
                producer: n,
                name: name.clone(),
                epoch: None,
            },
        );
        Ok((producer, name))
    }

    /// Barrier `epoch` ends transaction `k`: its producer (to flush) and name, if it
    /// is open.
    pub(super) fn prepare(
        &self,
        k: u64,
        epoch: Epoch,
    ) -> Result<Option<(Arc<KafkaProducer>, String)>> {
        let mut state = self.lock()?;
        let Some(open) = state.open.get_mut(&k) else {
            return Ok(None);
        };
        open.epoch = Some(epoch);
        let (n, name) = (open.producer, open.name.clone());
        Ok(Some((state.producers[n].clone(), name)))
    }

    /// Whether this process holds `epoch`'s transaction (open or committed).
    pub(super) fn holds(&self, epoch: Epoch) -> Result<bool> {
        let state = self.lock()?;
        Ok(state.committed.contains(&epoch) || state.open.values().any(|o| o.epoch == Some(epoch)))
    }

    /// Commits every prepared transaction up to `epoch` (older ones are of failed
    /// checkpoints, whose output the newer state has moved past). Whether `epoch` is
    /// committed by this process (now or before).
    pub(super) fn commit_through(&self, epoch: Epoch) -> Result<bool> {
        let mut state = self.lock()?;
        let due: Vec<u64> = state
            .open
            .iter()
            .filter(|(_, o)| o.epoch.is_some_and(|e| e <= epoch))
            .map(|(k, _)| *k)
            .collect();
        for k in due {
            let Some(open) = state.open.get(&k) else {
                continue;
            };
            let (n, e) = (open.producer, open.epoch.unwrap_or(epoch));
            let producer = state.producers[n].clone();
            let fail = |what: &str, err: KafkaError| {
                self.config
                    .client
                    .error(format!("{what} the transaction of epoch {e}: {err}"))
            };
            producer
                .send_offsets_to_transaction(
                    &self.ledger.entry(e)?,
                    &self.ledger.group()?,
                    FLUSH_TIMEOUT,
                )
                .map_err(|err| fail("recording the ledger entry of", err))?;
            producer
                .commit_transaction(FLUSH_TIMEOUT)
                .map_err(|err| fail("committing", err))?;
            state.open.remove(&k);
            state.idle.push(n);
            state.committed.insert(e);
        }
        while state.committed.len() > 64 {
            state.committed.pop_first();
        }
        Ok(state.committed.contains(&epoch))
    }

    /// Aborts every open transaction (recovery: no checkpoint committed them).
    pub(super) fn abort_all(&self) -> Result<usize> {
        let mut state = self.lock()?;
        let open = std::mem::take(&mut state.open);
        let aborted = open.len();
        for (_, o) in open {
            state.producers[o.producer]
                .abort_transaction(FLUSH_TIMEOUT)
                .map_err(|e| {
                    self.config
                        .client
                        .error(format!("aborting a transaction: {e}"))
                })?;
            state.idle.push(o.producer);
        }
        Ok(aborted)
    }
}
