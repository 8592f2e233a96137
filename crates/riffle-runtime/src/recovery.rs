//! Choosing and loading the checkpoint a job resumes from, and recording why.

use crate::error::{RuntimeError, RuntimeResult};
use crate::restore::RestoredJob;
use riffle_core::Epoch;
use riffle_state::recovery::{plan_recovery, EpochFinding, RecoveryPlan};
use riffle_state::{CheckpointStore, Manifest, StateError};

use serde::Serialize;

/// What recovery decided.
#[derive(Debug)]
pub struct Recovered {
    /// The plan (chosen epoch, skipped damaged epochs, swept partial ones).
    pub plan: RecoveryPlan,
    /// The chosen checkpoint's manifest.
    pub manifest: Option<Manifest>,
    /// Its state, ready for [`JobConfig::restore`](crate::job::JobConfig).
    pub restored: Option<RestoredJob>,
    /// The first epoch the resumed run takes: past every existing epoch directory.
    pub next_epoch: Epoch,
    /// The resumed run's generation: past every recorded generation.
    pub generation: u64,
}

#[derive(Serialize)]
struct RecoveryRecord<'a> {
    at_ms: i64,
    restored_epoch: Option<Epoch>,
    roll_forward: bool,
    skipped_damaged: Vec<(Epoch, &'a str)>,
    swept_partial: &'a [Epoch],
    generation: u64,
    watermark: Option<i64>,
}

fn state_error(e: StateError) -> RuntimeError {
    RuntimeError::Checkpoint(e.to_string())
}

/// Finds the newest usable checkpoint of the store's pipeline, loads it, sweeps partial
/// epochs and writes a recovery record (`recovery/{ms}.json`). A damaged newer
/// checkpoint is skipped (and named in the plan), never deleted.
///
/// `fingerprint` is the plan's ([`JobGraph::fingerprint`](crate::JobGraph::fingerprint)):
/// a checkpoint taken by a different plan is refused before anything is changed on
/// storage.
///
/// # Errors
/// Storage failures; checkpoints exist but none is usable, or the newest usable one
/// belongs to a different plan (the caller must choose to start empty explicitly).
pub async fn recover(store: &CheckpointStore, fingerprint: &str) -> RuntimeResult<Recovered> {
    let findings = store.findings(true).await.map_err(state_error)?;
    let generation = findings
        .iter()
        .filter_map(|(_, f)| match f {
            EpochFinding::Valid(m) => Some(m.generation),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let plan = plan_recovery(&findings);
    let manifest = plan.restore.and_then(|e| {
        findings.iter().find_map(|(epoch, f)| match f {
            EpochFinding::Valid(m) if *epoch == e => Some(m.clone()),
            _ => None,
        })
    });
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
    if let Some(m) = &manifest {
        if !m.plan_fingerprint.is_empty() && m.plan_fingerprint != fingerprint {
            return Err(RuntimeError::Checkpoint(format!(
                "checkpoint epoch {} of `{}` was taken by a different pipeline (other query, event count or options); start from empty state with --no-restore, or use another state root",
                m.epoch, m.pipeline
            )));
        }
    }
    let restored = match &manifest {
        Some(m) => Some(RestoredJob::load(store, m).await.map_err(state_error)?),
        None => None,
    };
    for epoch in &plan.partial {
        store.delete_epoch(*epoch).await.map_err(state_error)?;
    }
    let next_epoch = Epoch(findings.iter().map(|(e, _)| e.0).max().unwrap_or(0) + 1);
    let record = RecoveryRecord {
        at_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64),
        restored_epoch: plan.restore,
        roll_forward: plan.roll_forward,
        skipped_damaged: plan.skipped.iter().map(|(e, r)| (*e, r.as_str())).collect(),
        swept_partial: &plan.partial,
        generation: generation + 1,
        watermark: manifest.as_ref().and_then(|m| m.watermark),
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
        generation: generation + 1,
    })
}
