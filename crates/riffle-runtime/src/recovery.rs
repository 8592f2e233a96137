//! Choosing and loading the checkpoint a job resumes from, finishing or discarding what
//! sinks staged, and recording why (docs/engine.md, "Failure").

mod named;
mod sinks;

pub use named::recover_from;

use crate::error::{RuntimeError, RuntimeResult};
use crate::graph::JobGraph;
use crate::plan_check::PlanCheck;
use crate::restore::RestoredJob;
use riffle_core::{Epoch, OutputOwner};
use riffle_state::recovery::OwnerStep;
use riffle_state::recovery::{
    kept_in_epoch, plan_recovery, referenced_files, same_listing, EpochFinding, RecoveryPlan,
};
use riffle_state::{CheckpointStore, Manifest, StateError};
use sinks::{
    abort_all_staged, claim_outputs, owner_steps, publish_restored, refuse_lost_output,
    refuse_unaccounted_output, take_back_skipped, unfinishable,
};

use serde::Serialize;
use std::sync::Arc;

/// What the user asked of recovery.
#[derive(Debug, Clone, Copy, Default)]
pub struct RecoveryOptions {
    /// Start from empty state even if checkpoints exist (`--no-restore`).
    pub start_empty: bool,
    /// Resume past damaged checkpoints even when a sink cannot take back what they
    /// published (`--accept-replayed-output`).
    pub accept_replayed_output: bool,
    /// Starting from empty state, remove the exactly-once output an earlier run
    /// published instead of refusing to write over it (`--replace-output`).
    pub replace_output: bool,
}

/// What recovery decided.
#[derive(Debug)]
pub struct Recovered {
    /// The plan (chosen epoch, skipped damaged epochs, swept partial ones).
    pub plan: RecoveryPlan,
    /// The chosen checkpoint's manifest.
    pub manifest: Option<Manifest>,
    /// Its state, ready for [`JobConfig::restore`](crate::job::JobConfig).
    pub restored: Option<Arc<RestoredJob>>,
    /// The first epoch the resumed run takes: past every existing epoch directory.
    pub next_epoch: Epoch,
    /// The resumed run's generation: past every recorded generation.
    pub generation: u64,
    /// Sink committables of a PREPARED checkpoint that were committed again.
    pub recommitted: usize,
    /// Staged sink output of uncommitted epochs that was discarded.
    pub aborted: usize,
    /// PREPARED epochs not rolled forward because a sink could not finish them (a
    /// Kafka transaction of a process that is gone), with the reason: they are replayed
    /// from the checkpoint before them.
    pub replayed: Vec<(Epoch, String)>,
    /// For a run started from a named savepoint or checkpoint: which, and what happens
    /// to each operator's state.
    pub restored_from: Option<(String, PlanCheck)>,
    /// Output published after the restored epoch (by damaged, skipped epochs) taken
    /// back before the replay: sink, how many files or rows.
    pub unpublished: Vec<(String, usize)>,
    /// The identity of the pipeline's state (`_identity.json`), which owns its output.
    pub state_id: String,
    /// The first epoch of the restored state's history (`Manifest::history_from`): this
    /// run's first epoch when it starts from empty state.
    pub history_from: Option<Epoch>,
    /// Committed epochs of that history whose output was taken back
    /// (`Manifest::taken_back`): this recovery's skipped epochs added.
    pub taken_back: Vec<Epoch>,
}

/// State a run starts from because the user named it (`--from-savepoint`,
/// `--from-checkpoint`), instead of the newest checkpoint.
#[derive(Debug, Clone)]
pub enum RestoreFrom {
    /// Savepoint `label` in `store` (this pipeline's state root, or another one).
    Savepoint {
        /// Where it is.
        store: CheckpointStore,
        /// Its label.
        label: String,
    },
    /// Checkpoint `epoch` in `store`.
    Checkpoint {
        /// Where it is.
        store: CheckpointStore,
        /// Its epoch.
        epoch: Epoch,
    },
}

/// A named start point and whether state the new plan has no operator for may be
/// dropped.
#[derive(Debug, Clone)]
pub struct ExplicitRestore {
    /// The savepoint or checkpoint.
    pub from: RestoreFrom,
    /// `--allow-non-restored-state`.
    pub allow_non_restored: bool,
}

#[derive(Serialize)]
struct RecoveryRecord<'a> {
    at_ms: i64,
    restored_epoch: Option<Epoch>,
    start_empty: bool,
    roll_forward: bool,
    recommitted: usize,
    aborted_staged: usize,
    skipped_damaged: Vec<(Epoch, &'a str)>,
    swept_partial: &'a [Epoch],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    replayed: Vec<(Epoch, &'a str)>,
    generation: u64,
    watermark: Option<i64>,
    source_offsets: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    restored_from: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    dropped_state: Vec<&'a str>,
}

pub(crate) fn state_error(e: StateError) -> RuntimeError {
    state_error_about("", e)
}

/// A failure of the checkpoint store, classified by its kind; `about` (if not empty)
/// says what recovery was doing.
fn state_error_about(about: &str, e: StateError) -> RuntimeError {
    RuntimeError::Checkpoint {
        failure: crate::error::CheckpointFailure::of_state(&e),
        message: if about.is_empty() {
            e.to_string()
        } else {
            format!("{about}: {e}")
        },
    }
}

/// A failed generation check: [`RuntimeError::Fenced`] when a newer run claimed the state.
pub(crate) fn fenced_or_state(e: StateError) -> RuntimeError {
    match e {
        StateError::StaleGeneration {
            generation,
            current,
            ..
        } => RuntimeError::Fenced {
            generation,
            current,
        },
        e => state_error(e),
    }
}

/// Prepares a run of `graph` on `store`: takes a new generation (fencing out older
/// processes), finds the newest usable checkpoint (unless `start_empty`), loads it, rolls
/// a PREPARED checkpoint's sink commits forward, discards sink output staged by
/// uncommitted epochs, sweeps partial epochs and writes a recovery record
/// (`recovery/{ms}-g{generation}.json`). A damaged newer checkpoint is skipped (and named in the
/// plan), never deleted.
///
/// # Errors
/// Storage failures; checkpoints exist but none is usable, or the newest usable one
/// belongs to a different plan (the caller must choose to start empty explicitly).
pub async fn recover(
    store: &CheckpointStore,
    graph: &JobGraph,
    options: RecoveryOptions,
) -> RuntimeResult<Recovered> {
    let RecoveryOptions {
        start_empty,
        accept_replayed_output,
        replace_output,
    } = options;
    // Choose from a listing, claim a generation, list again: a zombie that prepares an
    // epoch after the claim sees the claim and publishes nothing, and one that prepared
    // before it is in the second listing. While the two listings differ, choose again.
    // A start refused while choosing claims nothing, so it fences no running process.
    let mut listing = store.findings(false).await.map_err(state_error)?;
    let ours = store.identity().await.map_err(state_error)?;
    let owners = owner_steps(
        &graph.sinks(),
        ours.as_ref().map(|i| i.id.as_str()),
        None,
        replace_output,
    )?;
    let mut claimed: Option<u64> = None;
    for _ in 0..8 {
        let choice = choose(store, graph, start_empty, listing.clone()).await?;
        let generation = match claimed {
            Some(g) => g,
            None => {
                let g = claim(store, &listing).await?;
                claimed = Some(g);
                g
            }
        };
        let relisted = store.findings(false).await.map_err(state_error)?;
        if !same_listing(&listing, &relisted) {
            listing = relisted;
            continue;
        }
        let (plan, manifest, restored, findings, replayed) = choice;
        return finish(
            store,
            graph,
            Chosen {
                plan,
                manifest,
                restored,
                findings,
                generation,
                start_empty,
                restored_from: None,
                replayed,
                accept_replayed_output,
                replace_output,
                owners,
            },
        )
        .await;
    }
    Err(RuntimeError::needs_user(
        "the pipeline's checkpoints kept changing while this run recovered: another process is writing them; stop it first",
    ))
}

/// What [`choose`] decided: the plan, the chosen manifest and its loaded state, the
/// findings as amended (damaged and replayed epochs marked), and the replayed epochs.
type Choice = (
    RecoveryPlan,
    Option<Manifest>,
    Option<Arc<RestoredJob>>,
    Vec<(Epoch, EpochFinding)>,
    Vec<(Epoch, String)>,
);

/// Picks the checkpoint to resume from, reading only: the newest usable one, skipping
/// damaged ones and PREPARED epochs a sink cannot finish.
async fn choose(
    store: &CheckpointStore,
    graph: &JobGraph,
    start_empty: bool,
    mut findings: Vec<(Epoch, EpochFinding)>,
) -> RuntimeResult<Choice> {
    let mut replayed = Vec::new();
    let (plan, manifest, restored) = loop {
        let mut plan = plan_recovery(&findings);
        if start_empty {
            plan.restore = None;
            plan.roll_forward = false;
            plan.skipped.clear();
        }
        let Some(epoch) = plan.restore else {
            break (plan, None, None);
        };
        let Some(manifest) = findings.iter().find_map(|(e, f)| match f {
            EpochFinding::Valid(m) if *e == epoch => Some(m.clone()),
            _ => None,
        }) else {
            break (plan, None, None);
        };
        if !of_this_plan(&manifest, graph) {
            // Epochs a different pipeline ran here after this one's newest checkpoint
            // are passed over like damaged ones: what they published to this
            // pipeline's sinks is taken back before the replay, or the start refused.
            let own_older = findings.iter().any(|(e, f)| {
                matches!(f, EpochFinding::Valid(m) if *e < epoch && of_this_plan(m, graph))
            });
            if !own_older {
                return Err(RuntimeError::needs_user(format!(
                    "checkpoint epoch {} in this state root was taken by a different pipeline (another query, event count or options), and none by this one; use another state root, or start this pipeline over here with --no-restore",
                    manifest.epoch
                )));
            }
            mark(
                &mut findings,
                epoch,
                EpochFinding::Damaged(
                    "taken by a different pipeline (another query, event count or options) after this one's newest checkpoint".into(),
                ),
            );
            continue;
        }
        // Checked before anything on storage changes: a refused start fences no
        // running process and rolls nothing forward.
        let check = PlanCheck::new(&manifest, graph);
        if !check.mismatched().is_empty() {
            return Err(RuntimeError::Restore {
                operator: riffle_core::OperatorId(check.mismatched().join(", ")),
                message: format!(
                    "checkpoint epoch {epoch} does not fit this run: {}",
                    check.refusal(true).unwrap_or_default()
                ),
            });
        }
        if plan.roll_forward {
            if let Some(reason) = unfinishable(graph, &manifest)? {
                // Swept like an epoch that never reached its commit point.
                mark(&mut findings, epoch, EpochFinding::Partial);
                replayed.push((epoch, reason));
                continue;
            }
        }
        // Loading checks every file's size and CRC32C; a damaged epoch is skipped and
        // the next older one tried.
        match RestoredJob::load(store, &manifest).await {
            Ok(restored) => break (plan, Some(manifest), Some(Arc::new(restored))),
            Err(e @ StateError::Corrupt { .. }) => {
                mark(&mut findings, epoch, EpochFinding::Damaged(e.to_string()));
            }
            Err(e) => return Err(state_error(e)),
        }
    };
    if manifest.is_none() && !plan.skipped.is_empty() {
        let reasons: Vec<String> = plan
            .skipped
            .iter()
            .map(|(e, r)| format!("epoch {e}: {r}"))
            .collect();
        return Err(RuntimeError::needs_user(format!(
            "no usable checkpoint: {}; fix or remove them, or start from empty state with --no-restore",
            reasons.join("; ")
        )));
    }
    Ok((plan, manifest, restored, findings, replayed))
}

/// Whether `manifest` was taken by this plan (manifests of versions that recorded no
/// fingerprint are taken to be).
fn of_this_plan(manifest: &Manifest, graph: &JobGraph) -> bool {
    manifest.plan_fingerprint.is_empty() || manifest.plan_fingerprint == graph.fingerprint()
}

/// Replaces what recovery found for `epoch`.
fn mark(findings: &mut [(Epoch, EpochFinding)], epoch: Epoch, finding: EpochFinding) {
    for (e, f) in findings.iter_mut() {
        if *e == epoch {
            *f = finding.clone();
        }
    }
}

/// Claims this run's generation: past every claim and every generation a manifest
/// records (state roots written before claims existed).
async fn claim(store: &CheckpointStore, findings: &[(Epoch, EpochFinding)]) -> RuntimeResult<u64> {
    let recorded = findings
        .iter()
        .filter_map(|(_, f)| match f {
            EpochFinding::Valid(m) => Some(m.generation),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let first = store
        .next_generation(recorded + 1)
        .await
        .map_err(state_error)?;
    // Between reading the claims and claiming is where two starting processes race.
    crate::crash::maybe_pause("before-claim", Epoch(0)).await;
    store
        .claim_generation_from(first)
        .await
        .map_err(state_error)
}

/// The operators of `manifest` that are sources of `graph` (their state is where they
/// resume reading), for the recovery record.
fn source_operators<'a>(graph: &JobGraph, manifest: Option<&'a Manifest>) -> Vec<&'a str> {
    manifest
        .iter()
        .flat_map(|m| m.operators.iter())
        .filter(|o| {
            graph
                .nodes()
                .iter()
                .any(|n| n.id.0 == o.operator && n.inputs.is_empty())
        })
        .map(|o| o.operator.as_str())
        .collect()
}

/// What recovery chose, before it changes storage.
struct Chosen {
    plan: RecoveryPlan,
    manifest: Option<Manifest>,
    restored: Option<Arc<RestoredJob>>,
    findings: Vec<(Epoch, EpochFinding)>,
    generation: u64,
    start_empty: bool,
    restored_from: Option<(String, PlanCheck)>,
    replayed: Vec<(Epoch, String)>,
    /// The user accepts that output of skipped damaged epochs which a sink cannot
    /// take back is written again by the replay.
    accept_replayed_output: bool,
    /// Starting empty, remove output earlier runs published instead of refusing.
    replace_output: bool,
    /// What to do about each sink's recorded output owner.
    owners: Vec<(String, OwnerStep)>,
}

/// Fences older processes, rolls a PREPARED epoch forward, discards staged sink output,
/// sweeps partial epochs and writes the recovery record.
async fn finish(
    store: &CheckpointStore,
    graph: &JobGraph,
    chosen: Chosen,
) -> RuntimeResult<Recovered> {
    let Chosen {
        plan,
        manifest,
        restored,
        findings,
        generation,
        start_empty,
        restored_from,
        replayed,
        accept_replayed_output,
        replace_output,
        owners,
    } = chosen;
    // The generation was claimed before the listing this plan comes from. Storage
    // changes from here on: a newer run that claimed meanwhile owns it.
    store
        .check_generation(generation, Epoch(0))
        .await
        .map_err(fenced_or_state)?;
    let settled = settle_sinks(
        store,
        graph,
        (&plan, manifest.as_ref(), &findings),
        (generation, &owners),
        (accept_replayed_output, replace_output),
    )
    .await?;
    let SinksSettled {
        unpublished,
        recommitted,
        aborted,
        state_id,
    } = settled;
    // Partial epochs are swept, except files a valid manifest still references (an
    // incremental checkpoint reusing them); only truly incomplete epochs are reported.
    let keep = referenced_files(&findings, &[]);
    for epoch in &plan.partial {
        store
            .delete_epoch(*epoch, &keep)
            .await
            .map_err(state_error)?;
    }
    let mut plan = plan;
    plan.partial.retain(|e| kept_in_epoch(&keep, *e) == 0);
    let next_epoch = Epoch(findings.iter().map(|(e, _)| e.0).max().unwrap_or(0) + 1);
    // Skipped epochs (damaged, or another pipeline's) stay on storage as they were,
    // but what they published was taken back: from a resume past them, the history
    // whose output the sinks must hold starts with this run.
    // The history goes on past them: every epoch it holds is still asked for, but
    // those whose output was taken back (every epoch after the restored one).
    let (history_from, taken_back) = match (&manifest, plan.restore) {
        (Some(m), Some(restored)) => {
            let mut taken_back = m.taken_back.clone();
            taken_back.extend(findings.iter().map(|(e, _)| *e).filter(|e| *e > restored));
            taken_back.sort_unstable();
            taken_back.dedup();
            (m.history_from, taken_back)
        }
        _ => (Some(next_epoch), Vec::new()),
    };
    let source_offsets = source_operators(graph, manifest.as_ref());
    let record = RecoveryRecord {
        at_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64),
        restored_epoch: plan.restore,
        start_empty,
        roll_forward: plan.roll_forward,
        recommitted,
        aborted_staged: aborted,
        skipped_damaged: plan.skipped.iter().map(|(e, r)| (*e, r.as_str())).collect(),
        swept_partial: &plan.partial,
        replayed: replayed.iter().map(|(e, r)| (*e, r.as_str())).collect(),
        generation,
        watermark: manifest.as_ref().and_then(|m| m.watermark),
        source_offsets,
        restored_from: restored_from.as_ref().map(|(what, _)| what.as_str()),
        dropped_state: restored_from
            .as_ref()
            .map(|(_, check)| check.dropped())
            .unwrap_or_default(),
    };
    let json = serde_json::to_vec_pretty(&record).unwrap_or_default();
    store
        .write_recovery_record(record.at_ms, generation, json)
        .await
        .map_err(state_error)?;
    // From the run's first epoch on, subtasks may go on from their restored files.
    let restored = match (restored, &manifest) {
        (Some(r), Some(m)) => Some(Arc::new(
            Arc::unwrap_or_clone(r).continuing_from(m, next_epoch),
        )),
        (restored, _) => restored,
    };
    Ok(Recovered {
        plan,
        manifest,
        restored,
        next_epoch,
        generation,
        recommitted,
        aborted,
        replayed,
        restored_from,
        unpublished,
        state_id,
        history_from,
        taken_back,
    })
}

/// What recovery did on the sinks.
struct SinksSettled {
    /// Output taken back: sink, how many files or rows.
    unpublished: Vec<(String, usize)>,
    /// Committables the restored manifest held back or was to publish, now published.
    recommitted: usize,
    /// Staged output of uncommitted epochs discarded.
    aborted: usize,
    /// The state root's identity, which every sink's output now records as its owner.
    state_id: String,
}

/// Every step recovery takes on the sinks, in order: refuse if a sink lost what the
/// checkpoints record as committed, or (starting empty) holds output no checkpoint
/// accounts for; claim every output; take back what skipped epochs published; publish
/// what the restored manifest held back (rolling a PREPARED one forward); discard
/// staged output of uncommitted epochs.
async fn settle_sinks(
    store: &CheckpointStore,
    graph: &JobGraph,
    (plan, manifest, findings): (&RecoveryPlan, Option<&Manifest>, &[(Epoch, EpochFinding)]),
    (generation, owners): (u64, &[(String, OwnerStep)]),
    (accept_replayed_output, replace_output): (bool, bool),
) -> RuntimeResult<SinksSettled> {
    let sinks = graph.sinks();
    // Before anything on a sink changes: a sink that lost epochs the checkpoints record
    // as committed would otherwise have files of those epochs discarded as staged, or
    // the run resume without their rows.
    if let (Some(restored), Some(m)) = (plan.restore, manifest) {
        let since = m.history_from.unwrap_or(restored);
        refuse_lost_output(&sinks, findings, (since, restored), &m.taken_back)?;
    }
    // Starting from empty state (the state is gone, or --no-restore) over output an
    // earlier run published: the run would write those rows again.
    let mut unpublished = Vec::new();
    if plan.restore.is_none() {
        unpublished.extend(refuse_unaccounted_output(&sinks, replace_output)?);
    }
    // Every sink's output is this pipeline's from here on.
    let identity = store.claim_identity().await.map_err(state_error)?;
    let owner = OutputOwner {
        id: identity.id.clone(),
        pipeline: graph.name.clone(),
        state: store.root_url().to_string(),
    };
    unpublished.extend(claim_outputs(&sinks, owners, &owner)?);
    // Epochs newer than the one restored (damaged, or a different pipeline's) published
    // output that the replay writes again: take back everything published after it
    // where the sink can, else refuse (or, when the user accepts it, say what will
    // appear twice).
    if let (Some(restored), false) = (plan.restore, plan.skipped.is_empty()) {
        let skipped: Vec<Epoch> = plan.skipped.iter().map(|(e, _)| *e).collect();
        unpublished.extend(take_back_skipped(
            &sinks,
            restored,
            &skipped,
            accept_replayed_output,
        )?);
    }
    // The restored state lies past everything its manifest covers: publish what it
    // held back for a later epoch (a sink covering several epochs per commit), and, when
    // it is PREPARED, what it was to publish itself — for each sink in one commit.
    let mut recommitted = 0;
    if let Some(m) = manifest {
        recommitted = publish_restored(&sinks, m, plan.roll_forward)?;
        if plan.roll_forward {
            store.commit(m).await.map_err(state_error)?;
        }
    }
    let aborted = abort_all_staged(&sinks, generation)?;
    Ok(SinksSettled {
        unpublished,
        recommitted,
        aborted,
        state_id: identity.id,
    })
}
