//! The REST API's JSON views, in the spirit of Flink's: `/api/job` (the graph with each
//! operator's live numbers), `/api/operators/{id}`, `/api/checkpoints` (this run's
//! history, the checkpoints retained on storage, the recovery records) and
//! `/api/savepoints`.

use super::live::{since_unix_epoch, LiveMetrics};
use super::outline::OutlineOperator;
use super::rates::{OperatorRates, Totals};
use riffle_runtime::metrics::SubtaskSample;
use riffle_state::recovery::EpochFinding;
use riffle_state::savepoints::SavepointFinding;
use riffle_state::{CheckpointStore, Manifest};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

fn now_ns() -> i64 {
    i64::try_from(since_unix_epoch().as_nanos()).unwrap_or(i64::MAX)
}

/// An event time (ns) as JSON milliseconds; `null` for none and the final watermark.
fn event_ms(time: Option<i64>) -> Value {
    time.filter(|t| *t > i64::MIN && *t < i64::MAX)
        .map_or(Value::Null, |t| json!(t / 1_000_000))
}

/// The state files a manifest references and their bytes.
fn files_and_bytes(manifest: &Manifest) -> (usize, u64) {
    (
        manifest.files().count(),
        manifest.files().map(|f| f.bytes).sum(),
    )
}

fn subtask_json(sample: &SubtaskSample, now: i64) -> Value {
    let counters = sample.counters.unwrap_or_default();
    let lag = sample
        .flow
        .watermark
        .filter(|w| *w < i64::MAX)
        .map(|w| now.saturating_sub(w) / 1_000_000);
    json!({
        "subtask": sample.subtask,
        "rows_in": sample.flow.rows_in,
        "rows_out": sample.flow.rows_out,
        "batches_in": sample.flow.batches_in,
        "batches_out": sample.flow.batches_out,
        "watermark_ms": event_ms(sample.flow.watermark),
        "watermark_lag_ms": lag,
        "blocked_ms": sample.flow.blocked.as_secs_f64() * 1000.0,
        "late_rows_dropped": counters.late_rows_dropped,
        "windows_emitted": counters.windows_emitted,
        "records_skipped": counters.records_skipped,
        "state_bytes_in_memory": sample.state_bytes.in_memory,
        "state_bytes_spilled": sample.state_bytes.spilled,
        "restore_ms": sample.restore_time.map(|t| t.as_secs_f64() * 1000.0),
        "pending": sample.pending.iter().map(|(split, n)| json!({ "split": split, "records": n })).collect::<Vec<_>>(),
    })
}

/// Each operator's totals over its subtasks, for [`Rates`].
fn totals(samples: &[SubtaskSample], outline: &[OutlineOperator]) -> BTreeMap<String, Totals> {
    let mut totals: BTreeMap<String, Totals> = BTreeMap::new();
    for s in samples {
        let t = totals.entry(s.operator.0.clone()).or_default();
        t.rows_in += s.flow.rows_in;
        t.rows_out += s.flow.rows_out;
        t.blocked += s.flow.blocked;
    }
    for op in outline {
        if let Some(t) = totals.get_mut(&op.id) {
            t.parallelism = op.parallelism;
        }
    }
    totals
}

/// Each operator's totals, and its rates now (none until the API has been asked a
/// second ago).
fn totals_and_rates(
    live: &LiveMetrics,
    samples: &[SubtaskSample],
) -> (BTreeMap<String, Totals>, BTreeMap<String, OperatorRates>) {
    let totals = totals(samples, &live.outline().operators);
    let rates = live.rates().observe(Instant::now(), totals.clone());
    (totals, rates)
}

fn operator_json(
    op: &OutlineOperator,
    samples: &[SubtaskSample],
    totals: Option<&Totals>,
    state: Option<(u64, u64)>,
    rates: Option<&OperatorRates>,
) -> Value {
    let now = now_ns();
    let mine: Vec<&SubtaskSample> = samples.iter().filter(|s| s.operator.0 == op.id).collect();
    let totals = totals.copied().unwrap_or_default();
    let watermark = mine.iter().map(|s| s.flow.watermark).min().flatten();
    json!({
        "id": op.id,
        "kind": op.kind,
        "description": op.description,
        "parallelism": op.parallelism,
        "inputs": op.inputs,
        "rows_in": totals.rows_in,
        "rows_out": totals.rows_out,
        "rows_in_per_second": rates.map(|r| r.rows_in_per_second),
        "rows_out_per_second": rates.map(|r| r.rows_out_per_second),
        "blocked_share": rates.map(|r| r.blocked_share),
        "watermark_ms": event_ms(watermark),
        "blocked_ms": totals.blocked.as_secs_f64() * 1000.0,
        "state_rows": state.map(|s| s.0),
        "state_bytes": state.map(|s| s.1),
        "subtasks": mine.iter().map(|s| subtask_json(s, now)).collect::<Vec<_>>(),
    })
}

/// `/api/job`: the pipeline, its counters, its checkpoint summary and every operator.
pub(super) fn job(live: &LiveMetrics, pipeline: &str) -> Value {
    let job = live.job();
    let samples = job
        .as_ref()
        .map(|j| j.subtask_samples())
        .unwrap_or_default();
    let (totals, rates) = totals_and_rates(live, &samples);
    let operators: Vec<Value> = live
        .outline()
        .operators
        .iter()
        .map(|op| {
            let id = op.id.as_str();
            operator_json(
                op,
                &samples,
                totals.get(id),
                live.state_of(id),
                rates.get(id),
            )
        })
        .collect();
    // After the operators: `state_of` takes the same lock.
    let tally = live.checkpoints();
    let last = tally.last_completed();
    let mut report = json!({
        "pipeline": pipeline,
        "attempts": live.attempts(),
        "restarts": live.attempts().saturating_sub(1),
        "checkpoints": {
            "committed": tally.committed,
            "failed": tally.failed,
            "last_epoch": last.map(|r| r.epoch),
            "last_duration_ms": last.and_then(|r| r.duration_ms),
            "last_bytes": last.and_then(|r| r.bytes),
            "last_failure": tally.last_failed().and_then(|r| r.failure.clone()),
            "savepoints": tally.savepoints,
        },
        "operators": operators,
    });
    if let Some(m) = job {
        report["source_rows"] = m.source_rows.load(Ordering::Relaxed).into();
        report["sink_rows"] = m.sink_rows.load(Ordering::Relaxed).into();
        report["source_max_event_time_ms"] =
            event_ms(Some(m.source_max_event_time.load(Ordering::Relaxed)));
        report["sink_watermark_ms"] = event_ms(m.sink_watermark());
    }
    report
}

/// `/api/operators/{id}`: one operator of [`job`], or `None` when there is no such one.
pub(super) fn operator(live: &LiveMetrics, id: &str) -> Option<Value> {
    let op = live.outline().operators.iter().find(|op| op.id == id)?;
    let samples = live.job().map(|j| j.subtask_samples()).unwrap_or_default();
    let (totals, rates) = totals_and_rates(live, &samples);
    Some(operator_json(
        op,
        &samples,
        totals.get(id),
        live.state_of(id),
        rates.get(id),
    ))
}

/// `/api/checkpoints`: this run's checkpoints (newest last), with `stored`: the
/// checkpoints retained on storage and the recovery records ([`stored_checkpoints`]).
pub(super) fn checkpoints(live: &LiveMetrics, stored: &Value) -> Value {
    let history = live
        .checkpoints()
        .history
        .iter()
        .cloned()
        .collect::<Vec<_>>();
    json!({ "history": history, "retained": stored["retained"], "recovery": stored["recovery"] })
}

/// The checkpoints retained on storage and the recovery records of every start.
///
/// # Errors
/// Reading the store.
pub(super) async fn stored_checkpoints(store: &CheckpointStore) -> Result<Value, String> {
    let findings = store.findings(false).await.map_err(|e| e.to_string())?;
    let retained: Vec<Value> = findings
        .iter()
        .map(|(epoch, finding)| match finding {
            EpochFinding::Valid(m) => {
                let (count, bytes) = files_and_bytes(m);
                json!({
                    "epoch": epoch.0,
                    "status": format!("{:?}", m.status),
                    "generation": m.generation,
                    "triggered_at_ms": m.triggered_at_ms,
                    "written_at_ms": m.written_at_ms,
                    "watermark_ms": event_ms(m.watermark),
                    "files": count,
                    "bytes": bytes,
                    "savepoint": m.savepoint,
                })
            }
            EpochFinding::Partial => json!({ "epoch": epoch.0, "status": "Partial" }),
            EpochFinding::Damaged(reason) => {
                json!({ "epoch": epoch.0, "status": "Damaged", "reason": reason })
            }
        })
        .collect();
    let recovery: Vec<Value> = store
        .recovery_records()
        .await
        .map_err(|e| e.to_string())?
        .iter()
        .map(|text| serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone())))
        .collect();
    Ok(json!({ "retained": retained, "recovery": recovery }))
}

/// What the API reads from storage, read again only after this run changed storage (a
/// checkpoint, a failure, a savepoint, a restart): a page polling every few seconds
/// must not cost object-store requests of its own between checkpoints.
#[derive(Default)]
pub(super) struct StoredViews {
    checkpoints: tokio::sync::Mutex<Option<(u64, Value)>>,
    savepoints: tokio::sync::Mutex<Option<(u64, Value)>>,
}

impl StoredViews {
    /// [`stored_checkpoints`], as of this run's latest change.
    ///
    /// # Errors
    /// Reading the store.
    pub(super) async fn checkpoints(
        &self,
        live: &LiveMetrics,
        store: &CheckpointStore,
    ) -> Result<Value, String> {
        Self::cached(&self.checkpoints, live.changes(), stored_checkpoints(store)).await
    }

    /// [`savepoints`], as of this run's latest change.
    ///
    /// # Errors
    /// Reading the store.
    pub(super) async fn savepoints(
        &self,
        live: &LiveMetrics,
        store: &CheckpointStore,
    ) -> Result<Value, String> {
        Self::cached(&self.savepoints, live.changes(), savepoints(store)).await
    }

    async fn cached(
        slot: &tokio::sync::Mutex<Option<(u64, Value)>>,
        changes: u64,
        read: impl std::future::Future<Output = Result<Value, String>>,
    ) -> Result<Value, String> {
        let mut slot = slot.lock().await;
        if let Some((_, value)) = slot.as_ref().filter(|(seen, _)| *seen == changes) {
            return Ok(value.clone());
        }
        let value = read.await?;
        *slot = Some((changes, value.clone()));
        Ok(value)
    }
}

/// `/api/savepoints`: every savepoint on storage.
///
/// # Errors
/// Reading the store.
pub(super) async fn savepoints(store: &CheckpointStore) -> Result<Value, String> {
    let found = store.savepoints().await.map_err(|e| e.to_string())?;
    let list: Vec<Value> = found
        .iter()
        .map(|(label, finding)| match finding {
            SavepointFinding::Valid(m) => {
                let (count, bytes) = files_and_bytes(m);
                json!({
                    "label": label,
                    "status": "valid",
                    "epoch": m.epoch.0,
                    "written_at_ms": m.written_at_ms,
                    "files": count,
                    "bytes": bytes,
                })
            }
            SavepointFinding::Incomplete => json!({ "label": label, "status": "incomplete" }),
            SavepointFinding::Damaged(reason) => {
                json!({ "label": label, "status": "damaged", "reason": reason })
            }
        })
        .collect();
    Ok(json!({ "savepoints": list }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::Epoch;
    use riffle_runtime::checkpoint_events::{CheckpointEvent, CheckpointListener};
    use riffle_state::{RequestCounts, StateRoot};
    use std::sync::Arc;

    #[tokio::test]
    async fn storage_is_read_again_only_after_the_run_changed_it() {
        let counts = Arc::new(RequestCounts::default());
        let root = StateRoot::parse("memory://").unwrap();
        let store = CheckpointStore::new(root, "p").counted(counts.clone());
        let (live, views) = (LiveMetrics::default(), StoredViews::default());
        views.checkpoints(&live, &store).await.unwrap();
        views.savepoints(&live, &store).await.unwrap();
        let first = counts.tally();
        assert!(first.requests() > 0);
        for _ in 0..5 {
            views.checkpoints(&live, &store).await.unwrap();
            views.savepoints(&live, &store).await.unwrap();
        }
        assert_eq!(counts.tally(), first, "polling read storage again");
        live.on_event(&CheckpointEvent::Failed {
            epoch: Epoch(1),
            reason: "test".into(),
            consecutive: 1,
        });
        views.checkpoints(&live, &store).await.unwrap();
        assert!(counts.tally().requests() > first.requests());
    }
}
