//! `GET /metrics`: the live state as Prometheus metric families. Every name, type and
//! label is documented in docs/operations.md ("Metrics"); a test keeps the two equal.

use super::exposition::{Families, Labels};
use super::live::{since_unix_epoch, LiveMetrics};
use riffle_runtime::metrics::SubtaskSample;

const NANOS: f64 = 1e9;

fn subtask_labels(sample: &SubtaskSample) -> Labels {
    vec![
        ("operator", sample.operator.0.clone()),
        ("subtask", sample.subtask.to_string()),
    ]
}

/// The metric families of `live` now, for pipeline `pipeline` (on `worker`, for a job
/// on several workers).
pub(super) fn families(live: &LiveMetrics, pipeline: &str, worker: Option<usize>) -> Families {
    let mut out = Families::new(pipeline, worker);
    let samples = live.job().map(|j| j.subtask_samples()).unwrap_or_default();
    operator_families(&mut out, &samples, since_unix_epoch().as_secs_f64());
    job_families(&mut out, live);
    out
}

fn operator_families(out: &mut Families, samples: &[SubtaskSample], now: f64) {
    let per = |value: fn(&SubtaskSample) -> Option<f64>| {
        samples
            .iter()
            .filter_map(move |s| value(s).map(|v| (subtask_labels(s), v)))
            .collect::<Vec<_>>()
    };
    type Counter = (
        &'static str,
        &'static str,
        fn(&SubtaskSample) -> Option<f64>,
    );
    let flow: [Counter; 5] = [
        ("riffle_operator_rows_in_total", "Rows that reached the operator subtask.", |s| {
            Some(s.flow.rows_in as f64)
        }),
        ("riffle_operator_rows_out_total", "Rows the operator subtask emitted.", |s| {
            Some(s.flow.rows_out as f64)
        }),
        ("riffle_operator_batches_in_total", "Batches that reached the operator subtask.", |s| {
            Some(s.flow.batches_in as f64)
        }),
        ("riffle_operator_batches_out_total", "Batches the operator subtask emitted.", |s| {
            Some(s.flow.batches_out as f64)
        }),
        (
            "riffle_operator_output_blocked_seconds_total",
            "Time the subtask's task waited on a full downstream channel (backpressure); counted on the operator whose output leaves the task.",
            |s| Some(s.flow.blocked.as_secs_f64()),
        ),
    ];
    for (name, help, value) in flow {
        out.counter(name, help, per(value));
    }
    // The final watermark (end of input) is not a time: no sample.
    let watermark = |s: &SubtaskSample| s.flow.watermark.filter(|w| *w < i64::MAX);
    out.gauge(
        "riffle_operator_watermark_seconds",
        "Event-time watermark the operator subtask has seen, in seconds since the Unix epoch.",
        samples
            .iter()
            .filter_map(|s| watermark(s).map(|w| (subtask_labels(s), w as f64 / NANOS))),
    );
    out.gauge(
        "riffle_operator_watermark_lag_seconds",
        "Wall-clock time now minus the operator subtask's watermark.",
        samples
            .iter()
            .filter_map(|s| watermark(s).map(|w| (subtask_labels(s), now - w as f64 / NANOS))),
    );
    out.gauge(
        "riffle_source_pending_records",
        "Records a source subtask has yet to read, per split (a Kafka partition: its last stable offset, as the broker last reported it, minus the next offset to read).",
        samples.iter().flat_map(|s| {
            s.pending.iter().map(|(split, n)| {
                let mut labels = subtask_labels(s);
                labels.push(("split", split.clone()));
                (labels, *n as f64)
            })
        }),
    );
    out.gauge(
        "riffle_operator_state_bytes",
        "Bytes of state an operator subtask held at its last snapshot, in memory (estimated) and in its spill tier (--state-memory; keys and encoded state before compression); reported by the unbounded GROUP BY.",
        samples
            .iter()
            .filter(|s| s.state_bytes.in_memory > 0 || s.state_bytes.spilled > 0)
            .flat_map(|s| {
                [("memory", s.state_bytes.in_memory), ("spill", s.state_bytes.spilled)].map(
                    |(tier, bytes)| {
                        let mut labels = subtask_labels(s);
                        labels.push(("tier", tier.to_string()));
                        (labels, bytes as f64)
                    },
                )
            }),
    );
    out.gauge(
        "riffle_operator_restore_seconds",
        "How long an operator subtask took to restore its state from the checkpoint in this run (decoding its files and rebuilding its state; subtasks restore in parallel, each takes rows once it has, and no checkpoint starts before all have).",
        samples.iter().filter_map(|s| {
            s.restore_time
                .map(|t| (subtask_labels(s), t.as_secs_f64()))
        }),
    );
    out.counter(
        "riffle_operator_late_rows_dropped_total",
        "Rows dropped because every window they belonged to had closed (kept across restores).",
        per(|s| s.counters.map(|c| c.late_rows_dropped as f64)),
    );
    out.counter(
        "riffle_operator_windows_emitted_total",
        "Windows (or sessions) fired and emitted (kept across restores).",
        per(|s| s.counters.map(|c| c.windows_emitted as f64)),
    );
    out.counter(
        "riffle_operator_records_skipped_total",
        "Malformed input records skipped by a source told to skip them (kept across restores).",
        per(|s| s.counters.map(|c| c.records_skipped as f64)),
    );
}

fn job_families(out: &mut Families, live: &LiveMetrics) {
    let one = |value: f64| [(Vec::new(), value)];
    out.counter(
        "riffle_job_restarts_total",
        "Restarts of the job from its newest checkpoint within this process.",
        one(live.attempts().saturating_sub(1) as f64),
    );
    let tally = live.checkpoints();
    out.counter(
        "riffle_checkpoints_completed_total",
        "Checkpoints committed.",
        one(tally.committed as f64),
    );
    out.counter(
        "riffle_checkpoints_failed_total",
        "Checkpoints that failed or were abandoned.",
        one(tally.failed as f64),
    );
    out.counter(
        "riffle_savepoints_total",
        "Savepoints taken.",
        one(tally.savepoints.len() as f64),
    );
    if let Some(last) = tally.last_completed() {
        out.gauge(
            "riffle_checkpoint_last_epoch",
            "Epoch of the newest committed checkpoint.",
            one(last.epoch as f64),
        );
        out.gauge(
            "riffle_checkpoint_last_completed_timestamp_seconds",
            "When the newest checkpoint committed, in seconds since the Unix epoch.",
            one(last.at_ms as f64 / 1000.0),
        );
    }
    out.histogram(
        "riffle_checkpoint_duration_seconds",
        "Checkpoint time from trigger to COMMITTED.",
        &tally.durations,
    );
    out.histogram(
        "riffle_checkpoint_alignment_seconds",
        "Longest barrier alignment of any task, per checkpoint.",
        &tally.alignments,
    );
    out.histogram(
        "riffle_checkpoint_snapshot_seconds",
        "Longest synchronous snapshot of any task (the task paused), per checkpoint.",
        &tally.snapshots,
    );
    out.histogram(
        "riffle_checkpoint_upload_seconds",
        "Time writing a checkpoint's state files (every task's, one after another).",
        &tally.uploads,
    );
    out.histogram(
        "riffle_checkpoint_commit_seconds",
        "Commit time per checkpoint: PREPARED manifest, sink commits, COMMITTED manifest.",
        &tally.commits,
    );
    out.histogram(
        "riffle_checkpoint_size_bytes",
        "State bytes uploaded per checkpoint (files reused from earlier epochs not counted).",
        &tally.sizes,
    );
    let state = |value: fn(&riffle_runtime::OperatorStateSize) -> u64| {
        tally
            .state
            .iter()
            .map(move |s| (vec![("operator", s.operator.clone())], value(s) as f64))
            .collect::<Vec<_>>()
    };
    out.counter(
        "riffle_sink_commits_total",
        "Sink transactions committed with checkpoints: PostgreSQL prepared transactions, Kafka transactions, subtasks' staged files.",
        tally
            .sink_commits
            .iter()
            .map(|(sink, n)| (vec![("operator", sink.clone())], *n as f64)),
    );
    let phases = tally.requests.phases();
    out.counter(
        "riffle_object_store_requests_total",
        "Object-store requests of committed checkpoints, by phase (upload, commit, gc) and kind (put, get, head, list, delete, copy).",
        phases.iter().flat_map(|(phase, t)| {
            t.by_kind().map(|(kind, n)| {
                (
                    vec![("phase", phase.to_string()), ("kind", kind.to_string())],
                    n as f64,
                )
            })
        }),
    );
    out.counter(
        "riffle_object_store_bytes_total",
        "Bytes moved to and from the object store by committed checkpoints, by phase and direction (written, read).",
        phases.iter().flat_map(|(phase, t)| {
            [("written", t.bytes_written), ("read", t.bytes_read)].map(|(direction, n)| {
                (
                    vec![("phase", phase.to_string()), ("direction", direction.to_string())],
                    n as f64,
                )
            })
        }),
    );
    out.gauge(
        "riffle_state_rows",
        "Rows in the operator's checkpointed state at the newest checkpoint.",
        state(|s| s.rows),
    );
    out.gauge(
        "riffle_state_bytes",
        "Bytes of the operator's checkpointed state files at the newest checkpoint.",
        state(|s| s.bytes),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::OperatorId;
    use riffle_runtime::metrics::JobMetrics;
    use std::sync::Arc;

    #[test]
    fn a_stateful_subtask_serves_its_state_bytes_per_tier() {
        let metrics = Arc::new(JobMetrics::default());
        let id = OperatorId("counts".into());
        metrics.register_flow(&id, 0);
        metrics
            .register_operator(&id, 0)
            .set_state_bytes(riffle_core::StateBytes {
                in_memory: 4096,
                spilled: 123,
            });
        let quiet = OperatorId("filter".into());
        metrics.register_flow(&quiet, 0);
        metrics.register_operator(&quiet, 0);
        let live = LiveMetrics::default();
        live.set_job(metrics);
        let text = families(&live, "p", None).encode().unwrap();
        for line in [
            "riffle_operator_state_bytes{pipeline=\"p\",operator=\"counts\",subtask=\"0\",tier=\"memory\"} 4096",
            "riffle_operator_state_bytes{pipeline=\"p\",operator=\"counts\",subtask=\"0\",tier=\"spill\"} 123",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        assert!(
            !text.contains("operator=\"filter\",subtask=\"0\",tier"),
            "{text}"
        );
    }

    #[test]
    fn a_subtask_that_restored_serves_how_long_it_took() {
        let metrics = Arc::new(JobMetrics::default());
        let id = OperatorId("counts".into());
        for subtask in 0..2 {
            metrics.register_flow(&id, subtask);
        }
        metrics
            .register_operator(&id, 1)
            .set_restore_time(std::time::Duration::from_millis(2500));
        metrics.register_operator(&id, 0);
        let live = LiveMetrics::default();
        live.set_job(metrics);
        let text = families(&live, "p", None).encode().unwrap();
        let line =
            "riffle_operator_restore_seconds{pipeline=\"p\",operator=\"counts\",subtask=\"1\"} 2.5";
        assert!(text.contains(line), "{line} not in\n{text}");
        // A subtask that restored nothing has no sample.
        assert!(
            !text.contains(
                "riffle_operator_restore_seconds{pipeline=\"p\",operator=\"counts\",subtask=\"0\"}"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_source_serves_the_records_each_split_has_yet_to_read() {
        let metrics = Arc::new(JobMetrics::default());
        let id = OperatorId("orders".into());
        metrics.register_flow(&id, 1);
        metrics.register_operator(&id, 1).set_pending("orders/3", 7);
        let live = LiveMetrics::default();
        live.set_job(metrics);
        let text = families(&live, "p", None).encode().unwrap();
        assert!(
            text.contains("riffle_source_pending_records{pipeline=\"p\",operator=\"orders\",subtask=\"1\",split=\"orders/3\"} 7"),
            "{text}"
        );
    }
}
