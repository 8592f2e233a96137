//! A sink that keeps every batch in memory, for embedding and tests.
//!
//! With checkpoints on it is transactional: rows of an epoch are staged per subtask and
//! appear in [`CollectSinkFactory::batches`] only when the epoch commits, so an
//! in-process restart shows exactly-once output.

use riffle_core::{
    Committable, Committer, Epoch, RecordBatch, Result, Sink, SinkContext, SinkFactory,
    SinkSummary, StagedOutput, StreamSchema,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug, Default)]
struct Collected {
    committed: Vec<RecordBatch>,
    /// The (subtask, epoch)s committed, for recovery's questions.
    published: std::collections::HashSet<(usize, Epoch)>,
    /// Rows pre-committed per (subtask, epoch), waiting for commit.
    staged: HashMap<(usize, Epoch), Vec<RecordBatch>>,
}

/// Builds sinks that append batches to one shared vector.
#[derive(Debug, Default, Clone)]
pub struct CollectSinkFactory {
    shared: Arc<Mutex<Collected>>,
}

impl CollectSinkFactory {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Collected> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Everything published so far, over all subtasks.
    pub fn batches(&self) -> Vec<RecordBatch> {
        self.lock().committed.clone()
    }
}

impl SinkFactory for CollectSinkFactory {
    fn describe(&self) -> String {
        "collect(memory)".into()
    }

    fn create(&self, _: &StreamSchema, ctx: &SinkContext) -> Result<Box<dyn Sink>> {
        Ok(Box::new(CollectSink {
            shared: self.clone(),
            subtask: ctx.subtask,
            exactly_once: ctx.exactly_once,
            pending: Vec::new(),
            rows: 0,
        }))
    }

    fn committer(&self) -> Option<&dyn Committer> {
        Some(self)
    }
}

impl Committer for CollectSinkFactory {
    fn commit(&self, committable: &Committable) -> Result<()> {
        let mut shared = self.lock();
        // Absent means already committed (a roll-forward repeating a commit).
        if let Some(batches) = shared
            .staged
            .remove(&(committable.subtask, committable.epoch))
        {
            shared.committed.extend(batches);
        }
        shared
            .published
            .insert((committable.subtask, committable.epoch));
        Ok(())
    }

    // Staged output lives in this process: a collector of a new process has none.
    fn staged_output(&self, committable: &Committable) -> Result<StagedOutput> {
        let shared = self.lock();
        let key = (committable.subtask, committable.epoch);
        Ok(if shared.published.contains(&key) {
            StagedOutput::Published
        } else if shared.staged.contains_key(&key) {
            StagedOutput::Staged
        } else {
            StagedOutput::Lost
        })
    }

    // In memory: a collector of a new process starts empty by design, and one of this
    // process lost nothing it published.
    fn holds_published(&self, committables: &[&Committable]) -> Result<Vec<bool>> {
        Ok(vec![true; committables.len()])
    }

    // In memory: one process, one run at a time.
    fn abort_staged(&self, _generation: u64) -> Result<usize> {
        let mut shared = self.lock();
        let n = shared.staged.len();
        shared.staged.clear();
        Ok(n)
    }
}

struct CollectSink {
    shared: CollectSinkFactory,
    subtask: usize,
    exactly_once: bool,
    /// Rows since the last barrier (exactly-once mode).
    pending: Vec<RecordBatch>,
    rows: u64,
}

impl Sink for CollectSink {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.rows += batch.num_rows() as u64;
        if self.exactly_once {
            self.pending.push(batch.clone());
        } else {
            self.shared.lock().committed.push(batch.clone());
        }
        Ok(())
    }

    fn pre_commit(&mut self, epoch: Epoch) -> Result<Option<String>> {
        if !self.exactly_once || self.pending.is_empty() {
            return Ok(None);
        }
        let batches = std::mem::take(&mut self.pending);
        self.shared
            .lock()
            .staged
            .insert((self.subtask, epoch), batches);
        Ok(Some(String::new()))
    }

    fn finish(&mut self) -> Result<SinkSummary> {
        Ok(SinkSummary {
            rows: self.rows,
            files: Vec::new(),
        })
    }
}
