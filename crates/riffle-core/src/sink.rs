//! The sink trait: where rows leave the pipeline, with two-phase commit for exactly-once.

use crate::error::Result;
use crate::message::Epoch;
use crate::schema::StreamSchema;
use crate::RecordBatch;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What one sink subtask wrote.
#[derive(Debug, Default, Clone)]
pub struct SinkSummary {
    /// Rows written.
    pub rows: u64,
    /// Files written (committed, or staged for commit), for file sinks.
    pub files: Vec<PathBuf>,
}

/// How a sink subtask runs.
#[derive(Debug, Clone, Copy)]
pub struct SinkContext {
    /// This subtask's index, `0..parallelism`.
    pub subtask: usize,
    /// How many subtasks the sink has.
    pub parallelism: usize,
    /// Checkpoints are on: output becomes visible only when
    /// [`SinkFactory::commit`] commits what [`Sink::pre_commit`] staged. Otherwise the
    /// sink publishes as it goes and at [`Sink::finish`].
    pub exactly_once: bool,
    /// The run's generation (fencing; 0 without checkpoints): sinks put it into the
    /// names of what they stage, so that no two runs stage under one name.
    pub generation: u64,
}

/// What a sink subtask staged for one epoch; the coordinator commits it once the epoch's
/// manifest is PREPARED, and recovery re-commits it (so commit must be idempotent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Committable {
    /// The sink's operator id.
    pub sink: String,
    /// The sink subtask that staged it.
    pub subtask: usize,
    /// The epoch it belongs to.
    pub epoch: Epoch,
    /// Sink-defined description of the staged transaction (JSON text).
    pub payload: String,
}

/// `committables` grouped by sink, each sink's in their order, the sinks in the order
/// they first appear (the order sinks commit in: see the manifest's sorting).
pub fn committables_by_sink(committables: &[Committable]) -> Vec<(&str, Vec<&Committable>)> {
    let mut groups: Vec<(&str, Vec<&Committable>)> = Vec::new();
    for c in committables {
        match groups.iter_mut().find(|(sink, _)| *sink == c.sink) {
            Some((_, group)) => group.push(c),
            None => groups.push((&c.sink, vec![c])),
        }
    }
    groups
}

/// Puts `committables` in the order they are published: sinks whose staged output dies
/// with the process (`outlives_process(sink)` false: Kafka transactions) first — until
/// they have committed, recovery may still replay the epoch instead, which is only
/// exact while no other sink has published it — then by sink, epoch and subtask. The
/// coordinator's manifests and recovery's roll-forward both publish in this order.
pub fn sort_for_commit(committables: &mut [Committable], outlives_process: impl Fn(&str) -> bool) {
    committables.sort_by_cached_key(|c| {
        (
            outlives_process(&c.sink),
            c.sink.clone(),
            c.epoch,
            c.subtask,
        )
    });
}

impl Committable {
    /// The sink-defined payload decoded as `T`; `what` says what it should be ("a file
    /// list"), for the error.
    ///
    /// # Errors
    /// The payload is not a `T` (a committable of another sink, or a damaged manifest).
    pub fn decode<T: serde::de::DeserializeOwned>(&self, what: &str) -> Result<T> {
        serde_json::from_str(&self.payload).map_err(|e| {
            crate::Error::config(
                "sink committable",
                format!(
                    "epoch {} of sink `{}` subtask {}: not {what}: {e}",
                    self.epoch, self.sink, self.subtask
                ),
            )
        })
    }
}

/// Where one committable of a PREPARED epoch stands, as its sink sees it at recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StagedOutput {
    /// Visible to readers, in whole or in part.
    Published,
    /// Staged and invisible: a commit publishes it.
    Staged,
    /// Neither published nor staged any more (a Kafka transaction that died with its
    /// process, staged files someone deleted): a commit cannot publish it.
    Lost,
}

/// What [`SinkFactory::unpublish`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unpublished {
    /// Removed this many published items (files, rows); 0 when the epoch had none.
    Removed(usize),
    /// Cannot take the epoch's output back, and why.
    Cannot(String),
}

/// The pipeline that owns a sink's output (a directory, a table): output belongs to
/// one pipeline, because two writing one place overwrite or mix each other's committed
/// rows (docs/engine.md, "One owner per output").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputOwner {
    /// The identity of the owning pipeline's state (random, kept in its state root, and
    /// the same for every run that resumes from that state).
    pub id: String,
    /// The pipeline's name, for messages.
    pub pipeline: String,
    /// Its state root, for messages.
    pub state: String,
}

impl std::fmt::Display for OutputOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pipeline `{}` with state at {} (state id {})",
            self.pipeline, self.state, self.id
        )
    }
}

/// One subtask of a sink.
pub trait Sink: Send {
    /// Writes rows. Rows may be buffered until [`pre_commit`](Sink::pre_commit) or
    /// [`finish`](Sink::finish).
    ///
    /// # Errors
    /// The destination cannot be written.
    fn write(&mut self, batch: &RecordBatch) -> Result<()>;

    /// Event time reached `watermark` at the sink (a partitioned file sink commits the
    /// partitions it closes). Nothing by default.
    ///
    /// # Errors
    /// As [`write`](Sink::write).
    fn on_watermark(&mut self, _watermark: crate::EventTime) -> Result<()> {
        Ok(())
    }

    /// Barrier `epoch` reached the sink: make everything written since the previous
    /// barrier durable but invisible, and describe it (the payload of a
    /// [`Committable`]). `None` when the sink has nothing to commit (non-transactional
    /// sinks, or no rows in this epoch).
    ///
    /// # Errors
    /// The staged output cannot be flushed.
    fn pre_commit(&mut self, _epoch: Epoch) -> Result<Option<String>> {
        Ok(None)
    }

    /// Input ended: flush and close everything, and say what was written. In
    /// exactly-once mode, rows after the last barrier stay staged (uncommitted).
    fn finish(&mut self) -> Result<SinkSummary>;
}

/// Builds sink subtasks; an exactly-once sink's [`Committer`] publishes or discards
/// what they staged.
pub trait SinkFactory: Send + Sync {
    /// Short description for `explain`, e.g. `files(jsonl, out/)`.
    fn describe(&self) -> String;

    /// Where the output lands (a directory, a table, a topic), spelled one way: two
    /// sinks of one job whose places overlap are refused before the job runs
    /// (docs/engine.md, "One owner per output"). Empty for sinks that write nowhere
    /// another sink could (stdout, memory, a black hole).
    fn output_places(&self) -> Vec<crate::OutputPlace> {
        Vec::new()
    }

    /// The committer of an exactly-once sink, which alone publishes what its subtasks
    /// staged (with checkpoints); `None` for a sink that writes as it goes and is
    /// at-least-once after a crash. A transactional sink cannot leave out its commit:
    /// [`Committer::commit`] has no default.
    fn committer(&self) -> Option<&dyn Committer> {
        None
    }

    /// Whether output is published only through a [`Committer`]. Answered by
    /// [`committer`](SinkFactory::committer); not to be overridden.
    fn is_transactional(&self) -> bool {
        self.committer().is_some()
    }

    /// Creates subtask `ctx.subtask` of `ctx.parallelism` for rows of `schema`.
    ///
    /// # Errors
    /// The destination cannot be opened.
    fn create(&self, schema: &StreamSchema, ctx: &SinkContext) -> Result<Box<dyn Sink>>;

    /// How many epochs one publication covers. With more than one, the coordinator holds
    /// a checkpoint's committables of this sink back (recorded in its manifest as held,
    /// which recovery publishes) until the held epochs span this many, or an epoch ends
    /// the input or takes a savepoint; then [`Committer::commit_all`] gets them all at
    /// once (docs/engine.md, "Exactly-once output"). Honoured only for sinks whose
    /// [`commit_outlives_process`](SinkFactory::commit_outlives_process).
    fn epochs_per_commit(&self) -> u64 {
        1
    }

    /// Whether staged output can still be committed by another process after the one
    /// that staged it died. Files and PostgreSQL's prepared transactions can; a Kafka
    /// producer's transaction cannot (librdkafka cannot resume another producer's
    /// transaction). The coordinator commits such sinks before the others.
    fn commit_outlives_process(&self) -> bool {
        true
    }

    /// The owner recorded for this sink's output, or `None` when none is recorded or
    /// the sink records none. Recovery reads it before it changes anything.
    ///
    /// # Errors
    /// Storage failures; an owner record that cannot be read.
    fn output_owner(&self) -> Result<Option<OutputOwner>> {
        Ok(None)
    }

    /// Records `owner` as the owner of this sink's output when no owner is recorded —
    /// by a conditional create, so that of two pipelines starting at once exactly one
    /// wins — or in place of the recorded one with `replace`. Returns the owner
    /// recorded afterwards (`None`: this sink records no owner).
    ///
    /// # Errors
    /// Storage failures.
    fn claim_output(&self, _owner: &OutputOwner, _replace: bool) -> Result<Option<OutputOwner>> {
        Ok(None)
    }
}

/// What publishes an exactly-once sink's staged output, and what recovery asks of it
/// (docs/engine.md, "Exactly-once output"). Split from [`SinkFactory`] so that a sink
/// that stages output cannot compile without saying how it is published and where it
/// stands.
pub trait Committer: Send + Sync {
    /// Publishes what a subtask staged. Idempotent: committing a committable again (a
    /// recovery rolling a PREPARED epoch forward) changes nothing.
    ///
    /// # Errors
    /// The staged output is gone without having been published, or storage fails.
    fn commit(&self, committable: &Committable) -> Result<()>;

    /// Publishes everything this sink's subtasks staged for one PREPARED manifest (one
    /// epoch, or several when timed-out epochs commit with a later one), in manifest
    /// order. Idempotent like [`commit`](Committer::commit), which it calls for each
    /// by default; a sink that publishes one transaction per epoch group (an Iceberg
    /// snapshot) overrides it.
    ///
    /// # Errors
    /// As [`commit`](Committer::commit).
    fn commit_all(&self, committables: &[&Committable]) -> Result<()> {
        committables.iter().try_for_each(|c| self.commit(c))
    }

    /// Recovery, before rolling a PREPARED epoch forward: where `committable` stands.
    /// An epoch with a [`StagedOutput::Lost`] committable cannot be rolled forward;
    /// recovery replays it from the checkpoint before it when nothing of it is
    /// published, and refuses to start when some is (docs/engine.md, "Exactly-once output").
    ///
    /// # Errors
    /// The external system cannot tell (unreachable).
    fn staged_output(&self, committable: &Committable) -> Result<StagedOutput>;

    /// Recovery, before it deletes, takes back or skips anything: whether this sink
    /// still holds, whole, what each of `committables` published — epochs that
    /// committed checkpoints record as published — in their order. A sink that lost
    /// one (a catalog restored from an older backup, a table truncated, a directory
    /// emptied) makes recovery refuse to start, naming the epochs, instead of resuming
    /// without those rows (docs/engine.md, "Output a sink lost"). By default what
    /// [`staged_output`](Committer::staged_output) says of each; a sink whose
    /// `Published` means "in part" answers for the whole, and one that can answer for
    /// all at once (one read of a table's history) does.
    ///
    /// # Errors
    /// The external system cannot tell (unreachable).
    fn holds_published(&self, committables: &[&Committable]) -> Result<Vec<bool>> {
        committables
            .iter()
            .map(|c| Ok(self.staged_output(c)? == StagedOutput::Published))
            .collect()
    }

    /// Recovery resumes from epoch `after` although newer checkpoints exist (they are
    /// damaged), so the replay writes again everything epochs after it published: takes
    /// that back, if this sink can — all of it, including output staged by an earlier
    /// epoch whose checkpoint failed and committed with a later one. Returns what it
    /// removed, or why it cannot (then recovery refuses to start unless the user
    /// accepts replayed output).
    ///
    /// # Errors
    /// Storage failures.
    fn unpublish(&self, after: Epoch) -> Result<Unpublished> {
        Ok(Unpublished::Cannot(format!(
            "this sink cannot take back what epochs after {after} published"
        )))
    }

    /// How many items of exactly-once output (files, rows) this sink already holds,
    /// published by some earlier run. Recovery asks before a run starts from empty
    /// state: writing again over such output would duplicate it, so the run is refused
    /// unless the user asks to replace it ([`unpublish`](Committer::unpublish) from
    /// epoch 0). 0 when the sink cannot tell.
    ///
    /// # Errors
    /// Storage failures.
    fn published(&self) -> Result<usize> {
        Ok(0)
    }

    /// Discards everything staged that no commit published (recovery, after rolling
    /// forward and before the job starts) by runs of generations before `generation`
    /// — never what a newer run that started meanwhile has staged; returns how many
    /// transactions or files.
    ///
    /// # Errors
    /// Storage failures.
    fn abort_staged(&self, _generation: u64) -> Result<usize> {
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committable(sink: &str, epoch: u64, subtask: usize) -> Committable {
        Committable {
            sink: sink.into(),
            subtask,
            epoch: Epoch(epoch),
            payload: String::new(),
        }
    }

    #[test]
    fn sinks_whose_output_dies_with_the_process_commit_first() {
        let mut all = vec![
            committable("files", 4, 0),
            committable("kafka", 4, 1),
            committable("files", 3, 1),
            committable("kafka", 4, 0),
            committable("files", 3, 0),
        ];
        sort_for_commit(&mut all, |sink| sink != "kafka");
        let order: Vec<(&str, u64, usize)> = all
            .iter()
            .map(|c| (c.sink.as_str(), c.epoch.0, c.subtask))
            .collect();
        assert_eq!(
            order,
            vec![
                ("kafka", 4, 0),
                ("kafka", 4, 1),
                ("files", 3, 0),
                ("files", 3, 1),
                ("files", 4, 0)
            ]
        );
    }

    #[test]
    fn committables_are_grouped_by_sink_in_first_appearance_order() {
        let all = [
            committable("kafka", 3, 0),
            committable("files", 3, 0),
            committable("kafka", 3, 1),
            committable("files", 4, 1),
        ];
        let groups = committables_by_sink(&all);
        let shape: Vec<(&str, Vec<(u64, usize)>)> = groups
            .iter()
            .map(|(sink, cs)| (*sink, cs.iter().map(|c| (c.epoch.0, c.subtask)).collect()))
            .collect();
        assert_eq!(
            shape,
            vec![
                ("kafka", vec![(3, 0), (3, 1)]),
                ("files", vec![(3, 0), (4, 1)])
            ]
        );
    }
}
