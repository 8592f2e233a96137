//! What recovery asks of the job's sinks before a run starts: whether a PREPARED
//! epoch can be finished, who owns the output, and taking back output a replay would
//! write again (docs/engine.md, "Exactly-once output" and "One owner per output").

use crate::error::{LostOutput, RuntimeError, RuntimeResult};
use crate::graph::JobGraph;
use riffle_core::{Committable, Epoch, OutputOwner, SinkFactory, StagedOutput, Unpublished};
use riffle_state::recovery::{
    decide_owner, decide_prepared, missing_published, published_by_checkpoints, EpochFinding,
    OwnerStep, PreparedEpoch,
};
use riffle_state::Manifest;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The job's sinks by operator id.
pub(super) type Sinks = HashMap<String, Arc<dyn SinkFactory>>;

/// Why a PREPARED `manifest` cannot be rolled forward, if a sink says it lost output
/// (then it is replayed); an error when the epoch is partly published and partly lost.
pub(super) fn unfinishable(graph: &JobGraph, manifest: &Manifest) -> RuntimeResult<Option<String>> {
    let sinks = graph.sinks();
    let mut outputs = Vec::new();
    let mut lost = Vec::new();
    let mut published = Vec::new();
    for c in &manifest.sink_committables {
        let Some(committer) = sinks.get(&c.sink).and_then(|s| s.committer()) else {
            continue; // reported when rolling forward
        };
        let output = committer.staged_output(c).map_err(|e| {
            RuntimeError::transient(format!(
                "epoch {} is PREPARED; asking sink `{}` where subtask {}'s output stands: {e}",
                manifest.epoch, c.sink, c.subtask
            ))
        })?;
        let place = format!("sink `{}` subtask {}", c.sink, c.subtask);
        match output {
            StagedOutput::Lost => lost.push(place),
            StagedOutput::Published => published.push(place),
            StagedOutput::Staged => {}
        }
        outputs.push(output);
    }
    match decide_prepared(&outputs) {
        PreparedEpoch::RollForward => Ok(None),
        PreparedEpoch::Replay => Ok(Some(format!(
            "the output of {} for epoch {} is gone without having been published (a transaction that died with its process, or staged files that were removed), and nothing of the epoch is visible; the epoch is replayed from the checkpoint before it",
            lost.join(", "),
            manifest.epoch
        ))),
        PreparedEpoch::Refuse => Err(RuntimeError::needs_user(format!(
            "epoch {} is PREPARED and partly published ({}) but the output of {} is lost: neither rolling it forward nor replaying it would be exact; restore the lost output, or start from an older checkpoint with --from-checkpoint and remove what epoch {} published",
            manifest.epoch,
            published.join(", "),
            lost.join(", "),
            manifest.epoch
        ))),
    }
}

/// What was taken back from some sinks, and why the others cannot take theirs back.
#[derive(Debug, Default)]
pub(super) struct TakenBack {
    /// Sink and how many files or rows it removed (sinks that removed none left out).
    pub removed: Vec<(String, usize)>,
    /// Why a sink cannot.
    pub cannot: Vec<String>,
}

/// Asks each of `sinks` to take back everything it published after `after` (epoch 0:
/// everything); `what` says why, for errors.
pub(super) fn unpublish_all<'a>(
    sinks: impl IntoIterator<Item = (&'a String, &'a Arc<dyn SinkFactory>)>,
    after: Epoch,
    what: &str,
) -> RuntimeResult<TakenBack> {
    let mut taken = TakenBack::default();
    for (id, sink) in sinks {
        // At-least-once sinks never promised that a replay writes nothing twice.
        let Some(committer) = sink.committer() else {
            continue;
        };
        match committer
            .unpublish(after)
            .map_err(|e| RuntimeError::transient(format!("{what} of sink `{id}`: {e}")))?
        {
            Unpublished::Removed(0) => {}
            Unpublished::Removed(n) => taken.removed.push((id.clone(), n)),
            Unpublished::Cannot(why) => taken.cannot.push(why),
        }
    }
    Ok(taken)
}

/// Each sink's [`OwnerStep`], read without changing anything; an error naming every
/// sink whose output another pipeline owns.
pub(super) fn owner_steps(
    sinks: &Sinks,
    ours: Option<&str>,
    predecessor: Option<&str>,
    replace: bool,
) -> RuntimeResult<Vec<(String, OwnerStep)>> {
    let mut steps = Vec::new();
    let mut refusals = Vec::new();
    for (id, sink) in sinks {
        let recorded = sink.output_owner().map_err(|e| {
            RuntimeError::transient(format!("reading who owns the output of sink `{id}`: {e}"))
        })?;
        match decide_owner(recorded.as_ref(), ours, predecessor, replace) {
            OwnerStep::Refuse(owner) => refusals.push(format!(
                "sink `{id}` ({}) belongs to {owner}",
                sink.describe()
            )),
            step => steps.push((id.clone(), step)),
        }
    }
    if !refusals.is_empty() {
        refusals.sort();
        let hint = if ours.is_none() {
            " (if that was this pipeline, its state is gone)"
        } else {
            ""
        };
        return Err(RuntimeError::needs_user(format!(
            "{}{hint}: an output belongs to one pipeline, and writing into another's would overwrite or duplicate its committed rows; write elsewhere, or run with --replace-output to remove that output and take it over",
            refusals.join("; ")
        )));
    }
    steps.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(steps)
}

/// Records `owner` on every sink as `steps` say, removing replaced output first (all of
/// it before any owner changes, so a refusal changes no owner); returns what was
/// removed. Fails when another pipeline recorded itself first (two started at once:
/// the other won).
pub(super) fn claim_outputs(
    sinks: &Sinks,
    steps: &[(String, OwnerStep)],
    owner: &OutputOwner,
) -> RuntimeResult<Vec<(String, usize)>> {
    let replaced = steps
        .iter()
        .filter(|(_, step)| *step == OwnerStep::Replace)
        .filter_map(|(id, _)| sinks.get_key_value(id));
    let taken = unpublish_all(replaced, Epoch(0), "removing the replaced output")?;
    if !taken.cannot.is_empty() {
        return Err(RuntimeError::needs_user(format!(
            "--replace-output: {}",
            taken.cannot.join("; ")
        )));
    }
    for (id, step) in steps {
        let Some(sink) = sinks.get(id) else { continue };
        let take_over = matches!(step, OwnerStep::Inherit | OwnerStep::Replace);
        let recorded = sink.claim_output(owner, take_over).map_err(|e| {
            RuntimeError::transient(format!("recording the owner of sink `{id}`'s output: {e}"))
        })?;
        if let Some(other) = recorded.filter(|r| r.id != owner.id) {
            return Err(RuntimeError::needs_user(format!(
                "sink `{id}` ({}) was just taken by {other}, which started at the same time; write elsewhere",
                sink.describe()
            )));
        }
    }
    Ok(taken.removed)
}

/// Refuses to go on when a sink no longer holds what the committed checkpoints from
/// `since` (the start of the restored state's history) up to `restored` record as
/// published (docs/engine.md, "Output a sink lost"). Asked
/// before recovery deletes, takes back or skips anything, so a refusal changes nothing.
pub(super) fn refuse_lost_output(
    sinks: &Sinks,
    findings: &[(Epoch, EpochFinding)],
    (since, restored): (Epoch, Epoch),
    taken_back: &[Epoch],
) -> RuntimeResult<()> {
    let mut by_sink: BTreeMap<&str, Vec<&Committable>> = BTreeMap::new();
    for c in published_by_checkpoints(findings, (since, restored), taken_back) {
        by_sink.entry(c.sink.as_str()).or_default().push(c);
    }
    let mut held = Vec::new();
    for (id, committables) in by_sink {
        // A sink the job no longer has is reported when its output is published.
        let Some(committer) = sinks.get(id).and_then(|s| s.committer()) else {
            continue;
        };
        let holds = committer.holds_published(&committables).map_err(|e| {
            RuntimeError::transient(format!(
                "asking sink `{id}` whether it still holds what the committed checkpoints record: {e}"
            ))
        })?;
        if holds.len() != committables.len() {
            return Err(RuntimeError::bug(format!(
                "sink `{id}` answered for {} of {} committed epochs' output",
                holds.len(),
                committables.len()
            )));
        }
        held.extend(committables.into_iter().zip(holds));
    }
    let missing = missing_published(held);
    if missing.is_empty() {
        return Ok(());
    }
    Err(RuntimeError::SinkLostOutput(
        missing
            .into_iter()
            .map(|(sink, epochs)| LostOutput {
                describe: sinks.get(&sink).map(|s| s.describe()).unwrap_or_default(),
                sink,
                epochs: epochs.into_iter().collect(),
            })
            .collect(),
    ))
}

/// A run that starts from empty state (the state is gone, or --no-restore) over output
/// an earlier run published would write those rows again: refuses, naming what each
/// sink holds, or with `replace` takes that output back first; returns what was taken.
pub(super) fn refuse_unaccounted_output(
    sinks: &Sinks,
    replace: bool,
) -> RuntimeResult<Vec<(String, usize)>> {
    let mut holding = Vec::new();
    for (id, sink) in sinks {
        let Some(committer) = sink.committer() else {
            continue; // at-least-once output promises nothing about a replay
        };
        let published = committer.published().map_err(|e| {
            RuntimeError::transient(format!("asking sink `{id}` what it holds: {e}"))
        })?;
        if published > 0 {
            holding.push((id, sink, published));
        }
    }
    let mut removed = Vec::new();
    let mut cannot: Vec<String> = if replace {
        let holding = holding.iter().map(|(id, sink, _)| (*id, *sink));
        let taken = unpublish_all(holding, Epoch(0), "removing the output")?;
        removed = taken.removed;
        taken.cannot
    } else {
        holding
            .iter()
            .map(|(id, sink, n)| {
                format!(
                    "sink `{id}` ({}) holds {n} published item(s)",
                    sink.describe()
                )
            })
            .collect()
    };
    if !cannot.is_empty() {
        cannot.sort();
        return Err(RuntimeError::needs_user(format!(
            "this run starts from empty state, but {} written by an earlier run that no checkpoint accounts for (its state is gone, or --no-restore); writing again would duplicate those rows: remove that output or write elsewhere, or run with --replace-output to remove it first",
            cannot.join("; ")
        )));
    }
    Ok(removed)
}

/// Epochs newer than `restored` (the `skipped` damaged ones, or a different pipeline's)
/// published output that the replay writes again: takes back everything published
/// after it where the sink can, else refuses unless the user `accept`s those rows
/// twice; returns what was taken.
pub(super) fn take_back_skipped(
    sinks: &Sinks,
    restored: Epoch,
    skipped: &[Epoch],
    accept: bool,
) -> RuntimeResult<Vec<(String, usize)>> {
    let skipped: Vec<String> = skipped.iter().map(ToString::to_string).collect();
    let why = format!(
        "checkpoint epoch(s) {} cannot be restored (damaged, or taken by a different pipeline)",
        skipped.join(", ")
    );
    take_back_after(
        sinks,
        restored,
        &why,
        "repair the damaged checkpoint",
        accept,
    )
}

/// Takes back what every sink published after epoch `restored`, which a run resuming
/// there writes again (`why` says why the epochs after it are passed over); where a
/// sink cannot, refuses (`fix` says what else the user may do) unless `accept`.
pub(super) fn take_back_after(
    sinks: &Sinks,
    restored: Epoch,
    why: &str,
    fix: &str,
    accept: bool,
) -> RuntimeResult<Vec<(String, usize)>> {
    let what = format!("taking back what was published after epoch {restored}");
    let taken = unpublish_all(sinks, restored, &what)?;
    if !taken.cannot.is_empty() && !accept {
        return Err(RuntimeError::needs_user(format!(
            "{why}, and resuming from epoch {restored} would write again what they published, which cannot be taken back ({}); {fix}, or run with --accept-replayed-output to accept those rows twice",
            taken.cannot.join("; ")
        )));
    }
    Ok(taken.removed)
}

/// The restored state lies past everything its manifest covers: publishes what it held
/// back for a later epoch (a sink covering several epochs per commit), and, when it is
/// PREPARED (`roll_forward`), what it was to publish itself — for each sink in one
/// commit. Returns how many committables were published.
pub(super) fn publish_restored(
    sinks: &Sinks,
    manifest: &Manifest,
    roll_forward: bool,
) -> RuntimeResult<usize> {
    let mut publishing = manifest.held_committables.clone();
    if roll_forward {
        publishing.extend(manifest.sink_committables.iter().cloned());
    }
    riffle_core::sort_for_commit(&mut publishing, |sink| {
        sinks.get(sink).is_none_or(|f| f.commit_outlives_process())
    });
    let mut published = 0;
    for (id, group) in riffle_core::committables_by_sink(&publishing) {
        let committer = sinks.get(id).and_then(|s| s.committer()).ok_or_else(|| {
            RuntimeError::needs_user(format!(
                "epoch {} holds unpublished output of sink `{id}`, which the job no longer has as an exactly-once sink",
                manifest.epoch
            ))
        })?;
        committer.commit_all(&group).map_err(|e| {
            RuntimeError::transient(format!(
                "publishing what epoch {} covers: committing sink `{id}`: {e}",
                manifest.epoch
            ))
        })?;
        published += group.len();
    }
    Ok(published)
}

/// Discards what runs of generations before `generation` staged and no commit
/// published, in every exactly-once sink; returns how many transactions or files.
pub(super) fn abort_all_staged(sinks: &Sinks, generation: u64) -> RuntimeResult<usize> {
    let mut aborted = 0;
    for (id, sink) in sinks {
        let Some(committer) = sink.committer() else {
            continue;
        };
        aborted += committer.abort_staged(generation).map_err(|e| {
            RuntimeError::transient(format!("discarding uncommitted output of sink `{id}`: {e}"))
        })?;
    }
    Ok(aborted)
}
