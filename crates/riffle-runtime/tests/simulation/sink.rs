//! The simulated external system: a transactional sink with the file sink's contract.
//! Staged output is named by epoch and generation, a commit publishes it (again is a
//! no-op), recovery asks where an epoch's output stands, takes back what epochs after a
//! restored one published, and discards what older generations staged.

use super::world::Shared;
use riffle_core::{
    Committable, Committer, Epoch, Sink, SinkContext, SinkFactory, StagedOutput, StreamSchema,
    Unpublished,
};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Mutex;

/// Output staged or published under one name.
#[derive(Debug, Clone)]
struct Output {
    epoch: Epoch,
    generation: u64,
    rows: Range<u64>,
}

#[derive(Default)]
struct Outputs {
    staged: BTreeMap<String, Output>,
    published: BTreeMap<String, Output>,
}

pub struct SimSink {
    outputs: Mutex<Outputs>,
    world: Shared,
}

impl SimSink {
    pub fn new(world: Shared) -> Self {
        Self {
            outputs: Mutex::new(Outputs::default()),
            world,
        }
    }

    fn outputs(&self) -> std::sync::MutexGuard<'_, Outputs> {
        self.outputs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A sink subtask's pre-commit at barrier `epoch`: stages `rows`, invisible.
    pub fn stage(&self, generation: u64, epoch: Epoch, rows: Range<u64>) -> Committable {
        let name = format!("e{:06}-g{generation}", epoch.0);
        self.outputs().staged.insert(
            name.clone(),
            Output {
                epoch,
                generation,
                rows,
            },
        );
        Committable {
            sink: "out".into(),
            subtask: 0,
            epoch,
            payload: name,
        }
    }

    /// Every published row, sorted (duplicates kept).
    pub fn published_rows(&self) -> Vec<u64> {
        let mut rows: Vec<u64> = self
            .outputs()
            .published
            .values()
            .flat_map(|o| o.rows.clone())
            .collect();
        rows.sort_unstable();
        rows
    }

    /// Invariant 1: published rows are each there once and form a prefix of the source.
    pub fn check_prefix(&self) -> Result<(), String> {
        let rows = self.published_rows();
        match rows.iter().enumerate().find(|(i, r)| *i as u64 != **r) {
            None => Ok(()),
            Some((i, r)) => {
                let outputs = self.outputs();
                let listing: Vec<String> = outputs
                    .published
                    .iter()
                    .map(|(n, o)| format!("{n}: {:?}", o.rows))
                    .collect();
                Err(format!(
                    "published output is not the source's rows once each: row {i} expected, found {r} ({} of {})",
                    if rows[..i].contains(r) { "a duplicate" } else { "a gap" },
                    listing.join(", ")
                ))
            }
        }
    }
}

impl SinkFactory for SimSink {
    fn describe(&self) -> String {
        "simulated transactional sink".into()
    }

    fn create(&self, _: &StreamSchema, _: &SinkContext) -> riffle_core::Result<Box<dyn Sink>> {
        Err(riffle_core::Error::plan(
            "the simulation stages output itself",
        ))
    }

    fn committer(&self) -> Option<&dyn Committer> {
        Some(self)
    }
}

impl Committer for SimSink {
    fn commit(&self, c: &Committable) -> riffle_core::Result<()> {
        let mut w = self.world.lock();
        if w.fault() {
            w.trace(format!("sink commit {} [Fail]", c.payload));
            return Err(riffle_core::Error::external("sim", "sink commit failed"));
        }
        w.trace(format!("sink commit {}", c.payload));
        drop(w);
        let mut outputs = self.outputs();
        if outputs.published.contains_key(&c.payload) {
            return Ok(());
        }
        match outputs.staged.remove(&c.payload) {
            Some(output) => {
                outputs.published.insert(c.payload.clone(), output);
                Ok(())
            }
            None => Err(riffle_core::Error::external(
                "sim",
                format!("staged output {} is gone", c.payload),
            )),
        }
    }

    fn staged_output(&self, c: &Committable) -> riffle_core::Result<StagedOutput> {
        let outputs = self.outputs();
        Ok(if outputs.published.contains_key(&c.payload) {
            StagedOutput::Published
        } else if outputs.staged.contains_key(&c.payload) {
            StagedOutput::Staged
        } else {
            StagedOutput::Lost
        })
    }

    fn unpublish(&self, after: Epoch) -> riffle_core::Result<Unpublished> {
        let mut outputs = self.outputs();
        let before = outputs.published.len();
        outputs.published.retain(|_, o| o.epoch <= after);
        let removed = before - outputs.published.len();
        drop(outputs);
        self.world
            .lock()
            .trace(format!("sink unpublish after {after}: {removed} removed"));
        Ok(Unpublished::Removed(removed))
    }

    fn abort_staged(&self, generation: u64) -> riffle_core::Result<usize> {
        let mut outputs = self.outputs();
        let before = outputs.staged.len();
        outputs.staged.retain(|_, o| o.generation >= generation);
        Ok(before - outputs.staged.len())
    }
}
