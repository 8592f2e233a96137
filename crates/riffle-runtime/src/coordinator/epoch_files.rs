//! Gathering an epoch: each ack's state written as Parquet (by the one writer,
//! `write_ack_state`, reusing files of the epoch before, once committed, where the
//! batches did not change) or received written from a worker, and the manifest assembled from all
//! of them.

use super::{now_ms, CheckpointCoordinator, LastCommittedReuse, OperatorInfo, Pending};
use crate::checkpoint_events::SubtaskTiming;
use crate::file_reuse::write_ack_state;
use crate::protocol::SnapshotAck;
use riffle_core::{may_reference_previous, Committable, CounterValues, OperatorId};
use riffle_state::manifest::{OperatorEntry, SubtaskEntry};
use riffle_state::Manifest;
use std::time::Instant;

impl CheckpointCoordinator {
    pub(super) async fn upload(
        &self,
        pending: &mut Pending,
        mut ack: SnapshotAck,
        reuse: &mut LastCommittedReuse,
    ) -> Result<(), riffle_state::StateError> {
        pending.alignment = pending.alignment.max(ack.alignment);
        pending.snapshot = pending.snapshot.max(ack.snapshot);
        let started = Instant::now();
        let bytes_before = pending.bytes;
        // State of this process's tasks is written here; a worker's arrives written.
        // Only the last commit's files and this epoch's are kept: a failed epoch's
        // batches are released.
        let keep: Vec<_> = [reuse.committed, Some(pending.epoch)]
            .into_iter()
            .flatten()
            .collect();
        reuse.files.keep_only(&keep);
        let store = (&self.store, self.config.generation);
        // The files of the epoch before, if it committed: the rule of every writer
        // (`may_reference_previous`), so that an operator that handed its batches over
        // knows, as on a worker, when they can be found.
        let reusable = reuse
            .committed
            .filter(|&c| may_reference_previous(pending.epoch, Some(c)));
        write_ack_state(store, &mut reuse.files, reusable, &mut ack).await?;
        let (task, subtask) = (ack.task.0.clone(), ack.subtask);
        let (alignment, snapshot) = (ack.alignment, ack.snapshot);
        for (operator, values) in ack.counters {
            let total = pending.counters.entry(operator.0).or_default();
            *total = total.plus(values);
        }
        // What an operator saw, below the task's watermark when one before it in the
        // chain holds it back.
        let watermark_of = |operator: &OperatorId| {
            (ack.held_watermarks.iter())
                .find(|(id, _)| id == operator)
                .map_or(ack.watermark, |(_, w)| *w)
        };
        let recorded = |w: i64| (w > i64::MIN).then_some(w);
        for (operator, files) in &ack.written {
            if files.is_empty() && !self.operators.contains_key(operator) {
                continue;
            }
            // Files reused from an earlier epoch were not written now.
            pending.bytes += (files.iter())
                .filter(|f| riffle_state::layout::written_by(&f.path, pending.epoch))
                .map(|f| f.bytes)
                .sum::<u64>();
            pending
                .files
                .entry(operator.0.clone())
                .or_default()
                .push(SubtaskEntry {
                    subtask: ack.subtask,
                    files: files.clone(),
                    watermark: recorded(watermark_of(operator)),
                });
        }
        let upload = started.elapsed();
        pending.upload += upload;
        pending.timings.push(SubtaskTiming {
            task,
            subtask,
            alignment,
            snapshot,
            upload,
            bytes: pending.bytes - bytes_before,
        });
        Ok(())
    }

    pub(super) fn manifest(&self, pending: &Pending, committables: &[Committable]) -> Manifest {
        let mut manifest = Manifest::prepared(
            &self.pipeline,
            self.config.generation,
            pending.epoch,
            pending.triggered_at_ms,
        );
        for (operator, subtasks) in &pending.files {
            let info = self
                .operators
                .get(&OperatorId(operator.clone()))
                .cloned()
                .unwrap_or(OperatorInfo {
                    parallelism: subtasks.len().max(1),
                    max_parallelism: riffle_core::DEFAULT_MAX_PARALLELISM,
                    stable_state: false,
                    description: None,
                    output_schema: None,
                });
            let mut subtasks = subtasks.clone();
            subtasks.sort_by_key(|s| s.subtask);
            manifest.operators.push(OperatorEntry {
                operator: operator.clone(),
                parallelism: info.parallelism,
                max_parallelism: info.max_parallelism,
                subtasks,
                description: info.description,
                output_schema: info.output_schema,
            });
        }
        manifest.sink_committables = committables.to_vec();
        riffle_core::sort_for_commit(&mut manifest.sink_committables, |sink| {
            self.sinks
                .get(sink)
                .is_none_or(|f| f.commit_outlives_process())
        });
        manifest.plan_fingerprint = self.plan_fingerprint.clone();
        manifest.state_id = self.config.state_id.clone();
        manifest.history_from = self.config.history_from;
        manifest.taken_back = self.config.taken_back.clone();
        if let Some(metrics) = &self.metrics {
            // Read when the last ack arrived: the watermark sinks had reached by then.
            manifest.watermark = metrics.sink_watermark();
        }
        let totals = pending
            .counters
            .values()
            .fold(CounterValues::default(), |a, b| a.plus(*b));
        manifest
            .counters
            .insert("late_rows_dropped".into(), totals.late_rows_dropped);
        manifest
            .counters
            .insert("windows_emitted".into(), totals.windows_emitted);
        manifest
            .counters
            .insert("records_skipped".into(), totals.records_skipped);
        manifest.operator_counters = pending.counters.clone();
        manifest.written_at_ms = now_ms();
        manifest
    }
}
