//! Choosing and loading the checkpoint a job resumes from, finishing or discarding what
//! sinks staged, and recording why (DESIGN §4, recovery).

use crate::error::{RuntimeError, RuntimeResult};
use crate::graph::JobGraph;
use crate::restore::RestoredJob;
use riffle_core::Epoch;
use riffle_state::recovery::{
    kept_in_epoch, plan_recovery, referenced_files, EpochFinding, RecoveryPlan,
};
use riffle_state::{CheckpointStore, Manifest, StateError};

use serde::Serialize;
use std::sync::Arc;

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
    generation: u64,
    watermark: Option<i64>,
    source_offsets: Vec<&'a str>,
}

fn state_error(e: StateError) -> RuntimeError {
    RuntimeError::Checkpoint(e.to_string())
}

/// Prepares a run of `graph` on `store`: takes a new generation (fencing out older
/// processes), finds the newest usable checkpoint (unless `start_empty`), loads it, rolls
/// a PREPARED checkpoint's sink commits forward, discards sink output staged by
/// uncommitted epochs, sweeps partial epochs and writes a recovery record
/// (`recovery/{ms}.json`). A damaged newer checkpoint is skipped (and named in the
/// plan), never deleted.
///
/// # Errors
/// Storage failures; checkpoints exist but none is usable, or the newest usable one
/// belongs to a different plan (the caller must choose to start empty explicitly).
pub async fn recover(
    store: &CheckpointStore,
    graph: &JobGraph,
    start_empty: bool,
) -> RuntimeResult<Recovered> {
    // Manifests only: state files are verified once, by loading the chosen epoch.
    let mut findings = store.findings(false).await.map_err(state_error)?;
    let newest_generation = findings
        .iter()
        .filter_map(|(_, f)| match f {
            EpochFinding::Valid(m) => Some(m.generation),
            _ => None,
        })
        .chain(store.read_generation().await.ok().flatten())
        .max()
        .unwrap_or(0);
    let generation = newest_generation + 1;
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
        if !manifest.plan_fingerprint.is_empty() && manifest.plan_fingerprint != graph.fingerprint()
        {
            return Err(RuntimeError::Checkpoint(format!(
                "checkpoint epoch {} of `{}` was taken by a different pipeline (other query, event count or options); start from empty state with --no-restore, or use another state root",
                manifest.epoch, manifest.pipeline
            )));
        }
        // Loading checks every file's size and CRC32C; a damaged epoch is skipped and
        // the next older one tried.
        match RestoredJob::load(store, &manifest).await {
            Ok(restored) => break (plan, Some(manifest), Some(Arc::new(restored))),
            Err(e @ StateError::Corrupt { .. }) => {
                for (e2, finding) in findings.iter_mut() {
                    if *e2 == epoch {
                        *finding = EpochFinding::Damaged(e.to_string());
                    }
                }
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
        return Err(RuntimeError::Checkpoint(format!(
            "no usable checkpoint: {}; fix or remove them, or start from empty state with --no-restore",
            reasons.join("; ")
        )));
    }
    // From here on storage changes: first fence out any older process still running.
    store
        .write_generation(generation)
        .await
        .map_err(state_error)?;
    let sinks = graph.sinks();
    let mut recommitted = 0;
    if let Some(m) = manifest.as_ref().filter(|_| plan.roll_forward) {
        for c in &m.sink_committables {
            let sink = sinks.get(&c.sink).ok_or_else(|| {
                RuntimeError::Checkpoint(format!(
                    "epoch {} is PREPARED with output of sink `{}`, which the job no longer has",
                    m.epoch, c.sink
                ))
            })?;
            sink.commit(c).map_err(|e| {
                RuntimeError::Checkpoint(format!(
                    "rolling epoch {} forward: committing sink `{}` subtask {}: {e}",
                    m.epoch, c.sink, c.subtask
                ))
            })?;
            recommitted += 1;
        }
        store.commit(m).await.map_err(state_error)?;
    }
    let mut aborted = 0;
    for (id, sink) in &sinks {
        aborted += sink.abort_staged().map_err(|e| {
            RuntimeError::Checkpoint(format!("discarding uncommitted output of sink `{id}`: {e}"))
        })?;
    }
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
    let source_offsets = manifest
        .iter()
        .flat_map(|m| m.operators.iter())
        .filter(|o| {
            graph
                .nodes()
                .iter()
                .any(|n| n.id.0 == o.operator && n.inputs.is_empty())
        })
        .map(|o| o.operator.as_str())
        .collect();
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
        generation,
        watermark: manifest.as_ref().and_then(|m| m.watermark),
        source_offsets,
    };
    let json = serde_json::to_vec_pretty(&record).unwrap_or_default();
    store
        .write_recovery_record(record.at_ms, json)
        .await
        .map_err(state_error)?;
    Ok(Recovered {
        plan,
        manifest,
        restored,
        next_epoch,
        generation,
        recommitted,
        aborted,
    })
}
