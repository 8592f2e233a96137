//! What `GET /metrics` reports: the running attempt's counters and the checkpoint
//! events so far.

use crate::checkpoint_events::{CheckpointEvent, CheckpointListener};
use crate::metrics::JobMetrics;
use serde::Serialize;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// What `GET /metrics` reports: the running attempt's counters (set when it starts) and
/// the checkpoint events so far. Register it as a checkpoint listener.
#[derive(Debug, Default)]
pub struct LiveMetrics {
    job: Mutex<Option<Arc<JobMetrics>>>,
    checkpoints: Mutex<CheckpointTally>,
}

#[derive(Debug, Default, Serialize)]
struct CheckpointTally {
    committed: u64,
    failed: u64,
    last_epoch: Option<u64>,
    last_duration_ms: Option<u64>,
    last_bytes: Option<u64>,
    last_failure: Option<String>,
    savepoints: Vec<String>,
}

impl LiveMetrics {
    /// The attempt that is running now.
    pub fn set_job(&self, metrics: Arc<JobMetrics>) {
        *self.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(metrics);
    }

    /// The report as JSON.
    pub(super) fn json(&self, pipeline: &str) -> String {
        let job = self.job.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let checkpoints = self.checkpoints.lock().unwrap_or_else(|e| e.into_inner());
        let mut report = serde_json::json!({ "pipeline": pipeline, "checkpoints": &*checkpoints });
        if let Some(m) = job {
            let max_event_time = m.source_max_event_time.load(Ordering::Relaxed);
            report["source_rows"] = m.source_rows.load(Ordering::Relaxed).into();
            report["sink_rows"] = m.sink_rows.load(Ordering::Relaxed).into();
            report["source_max_event_time"] =
                (max_event_time > i64::MIN).then_some(max_event_time).into();
            report["sink_watermark"] = m.sink_watermark().into();
            report["operators"] = m
                .operator_totals()
                .iter()
                .map(|o| {
                    serde_json::json!({
                        "operator": o.operator.0,
                        "late_rows_dropped": o.late_rows_dropped,
                        "windows_emitted": o.windows_emitted,
                        "records_skipped": o.records_skipped,
                    })
                })
                .collect();
        }
        report.to_string()
    }
}

impl CheckpointListener for LiveMetrics {
    fn on_event(&self, event: &CheckpointEvent) {
        let mut tally = self.checkpoints.lock().unwrap_or_else(|e| e.into_inner());
        match event {
            CheckpointEvent::Completed {
                epoch,
                duration,
                bytes,
                ..
            } => {
                tally.committed += 1;
                tally.last_epoch = Some(epoch.0);
                tally.last_duration_ms = Some(duration.as_millis() as u64);
                tally.last_bytes = Some(*bytes);
            }
            CheckpointEvent::Failed { reason, .. } => {
                tally.failed += 1;
                tally.last_failure = Some(reason.clone());
            }
            CheckpointEvent::Savepoint(done) => tally.savepoints.push(done.label.clone()),
            CheckpointEvent::Started { .. } | CheckpointEvent::Acked { .. } => {}
        }
    }
}
