//! Live counters of a running job, read by the progress line, the run summary and the
//! control endpoint's metrics.

use riffle_core::operator::OperatorCounters;
use riffle_core::{CommittedEpoch, Epoch, EventTime, OperatorId};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What flows through one operator subtask: rows and batches in and out, its event-time
/// watermark, and the time its task spent blocked sending to a full channel
/// (backpressure). Not checkpointed: a restarted attempt counts from zero, as a
/// Prometheus counter may.
#[derive(Debug)]
pub struct FlowCounters {
    /// Rows that reached the operator (for a source: none).
    pub rows_in: AtomicU64,
    /// Rows it emitted (for a sink: none).
    pub rows_out: AtomicU64,
    /// Batches that reached it.
    pub batches_in: AtomicU64,
    /// Batches it emitted.
    pub batches_out: AtomicU64,
    /// The event-time watermark it has seen (`i64::MIN`: none yet).
    pub watermark: AtomicI64,
    /// Nanoseconds its task waited on a full downstream channel (only for the operator
    /// whose output leaves the task).
    pub blocked_nanos: AtomicU64,
}

impl Default for FlowCounters {
    fn default() -> Self {
        Self {
            rows_in: AtomicU64::new(0),
            rows_out: AtomicU64::new(0),
            batches_in: AtomicU64::new(0),
            batches_out: AtomicU64::new(0),
            watermark: AtomicI64::new(i64::MIN),
            blocked_nanos: AtomicU64::new(0),
        }
    }
}

impl FlowCounters {
    /// A batch of `rows` arrived.
    pub(crate) fn received(&self, rows: usize) {
        self.rows_in.fetch_add(rows as u64, Ordering::Relaxed);
        self.batches_in.fetch_add(1, Ordering::Relaxed);
    }

    /// These batches were emitted.
    pub(crate) fn emitted(&self, batches: &[riffle_core::RecordBatch]) {
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        self.rows_out.fetch_add(rows as u64, Ordering::Relaxed);
        self.batches_out
            .fetch_add(batches.len() as u64, Ordering::Relaxed);
    }

    /// The watermark advanced to `watermark`.
    pub(crate) fn watermark_at(&self, watermark: EventTime) {
        self.watermark.fetch_max(watermark, Ordering::Relaxed);
    }

    fn values(&self) -> FlowValues {
        let watermark = self.watermark.load(Ordering::Relaxed);
        FlowValues {
            rows_in: self.rows_in.load(Ordering::Relaxed),
            rows_out: self.rows_out.load(Ordering::Relaxed),
            batches_in: self.batches_in.load(Ordering::Relaxed),
            batches_out: self.batches_out.load(Ordering::Relaxed),
            watermark: (watermark > i64::MIN).then_some(watermark),
            blocked: std::time::Duration::from_nanos(self.blocked_nanos.load(Ordering::Relaxed)),
        }
    }
}

/// [`FlowCounters`] read at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowValues {
    /// Rows in.
    pub rows_in: u64,
    /// Rows out.
    pub rows_out: u64,
    /// Batches in.
    pub batches_in: u64,
    /// Batches out.
    pub batches_out: u64,
    /// Event-time watermark, if any yet.
    pub watermark: Option<EventTime>,
    /// Time blocked on full downstream channels.
    pub blocked: std::time::Duration,
}

/// One operator subtask's counters at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubtaskSample {
    /// The operator.
    pub operator: OperatorId,
    /// The subtask.
    pub subtask: usize,
    /// What flowed through it.
    pub flow: FlowValues,
    /// Its checkpointed counters (none for a sink).
    pub counters: Option<riffle_core::CounterValues>,
    /// For a source: records each split it reads has yet to read.
    pub pending: Vec<(String, u64)>,
    /// For a stateful operator that measures it: its state bytes at its last snapshot.
    pub state_bytes: riffle_core::StateBytes,
    /// How long it took to restore its state in this run, if it restored any.
    pub restore_time: Option<std::time::Duration>,
}

/// Counters shared by every task of a job.
#[derive(Debug)]
pub struct JobMetrics {
    /// Rows produced by all source subtasks.
    pub source_rows: AtomicU64,
    /// Rows written by all sink subtasks.
    pub sink_rows: AtomicU64,
    /// Largest event time any source has emitted.
    pub source_max_event_time: AtomicI64,
    /// Newest epoch the job committed; sources and operators are told. Set through
    /// [`JobMetrics::checkpoint_completed`] by the coordinator, and on a cluster worker
    /// without one by worker 0's word of each commit (docs/cluster.md).
    pub completed_epoch: CommittedEpoch,
    sink_watermarks: Mutex<Vec<i64>>,
    operators: Mutex<Vec<(OperatorId, usize, Arc<OperatorCounters>)>>,
    flows: Mutex<Vec<(OperatorId, usize, Arc<FlowCounters>)>>,
}

impl Default for JobMetrics {
    fn default() -> Self {
        Self {
            source_rows: AtomicU64::new(0),
            sink_rows: AtomicU64::new(0),
            source_max_event_time: AtomicI64::new(i64::MIN),
            completed_epoch: CommittedEpoch::default(),
            sink_watermarks: Mutex::new(Vec::new()),
            operators: Mutex::new(Vec::new()),
            flows: Mutex::new(Vec::new()),
        }
    }
}

/// Sums of an operator's counters over its subtasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorTotals {
    /// The operator.
    pub operator: OperatorId,
    /// Late rows dropped.
    pub late_rows_dropped: u64,
    /// Windows emitted.
    pub windows_emitted: u64,
    /// Malformed records skipped.
    pub records_skipped: u64,
    /// How long its slowest subtask took to restore its state in this run, if any
    /// restored state.
    pub restore_time: Option<std::time::Duration>,
}

impl JobMetrics {
    /// Checkpoint `epoch` committed: sources commit what it covers outside (a Kafka
    /// consumer group's offsets), a cluster worker may reuse its state files. An
    /// older word than one heard already changes nothing.
    pub fn checkpoint_completed(&self, epoch: Epoch) {
        self.completed_epoch.heard(epoch);
    }

    /// The newest committed epoch heard of, if any.
    pub fn completed(&self) -> Option<Epoch> {
        self.completed_epoch.newest()
    }

    /// Registers counters of one operator subtask.
    pub fn register_operator(
        &self,
        operator: &OperatorId,
        subtask: usize,
    ) -> Arc<OperatorCounters> {
        let counters = Arc::new(OperatorCounters::default());
        let mut operators = self.operators.lock().unwrap_or_else(|e| e.into_inner());
        operators.push((operator.clone(), subtask, counters.clone()));
        counters
    }

    /// Registers the flow counters of one operator subtask (source, operator or sink).
    pub fn register_flow(&self, operator: &OperatorId, subtask: usize) -> Arc<FlowCounters> {
        let flow = Arc::new(FlowCounters::default());
        let mut flows = self.flows.lock().unwrap_or_else(|e| e.into_inner());
        flows.push((operator.clone(), subtask, flow.clone()));
        flow
    }

    /// Every operator subtask's counters now: operators in the order their first
    /// subtask registered (the plan's order), each one's subtasks in order.
    pub fn subtask_samples(&self) -> Vec<SubtaskSample> {
        let flows = self.flows.lock().unwrap_or_else(|e| e.into_inner());
        let operators = self.operators.lock().unwrap_or_else(|e| e.into_inner());
        let mut order: Vec<&OperatorId> = Vec::new();
        for (operator, _, _) in flows.iter() {
            if !order.contains(&operator) {
                order.push(operator);
            }
        }
        let rank = |id: &OperatorId| order.iter().position(|o| *o == id);
        let mut sorted: Vec<_> = flows.iter().collect();
        sorted.sort_by_key(|(operator, subtask, _)| (rank(operator), *subtask));
        sorted
            .into_iter()
            .map(|(operator, subtask, flow)| {
                let counters = operators
                    .iter()
                    .find(|(o, s, _)| o == operator && s == subtask)
                    .map(|(_, _, c)| c);
                SubtaskSample {
                    operator: operator.clone(),
                    subtask: *subtask,
                    flow: flow.values(),
                    counters: counters.map(|c| c.values()),
                    pending: counters.map(|c| c.pending()).unwrap_or_default(),
                    state_bytes: counters.map(|c| c.state_bytes()).unwrap_or_default(),
                    restore_time: counters.and_then(|c| c.restore_time()),
                }
            })
            .collect()
    }

    /// Registers a sink subtask's watermark slot; returns its index.
    pub(crate) fn register_sink(&self) -> usize {
        let mut marks = self
            .sink_watermarks
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        marks.push(i64::MIN);
        marks.len() - 1
    }

    pub(crate) fn set_sink_watermark(&self, slot: usize, watermark: EventTime) {
        let mut marks = self
            .sink_watermarks
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        marks[slot] = watermark;
    }

    /// The smallest watermark any sink subtask has seen, if any sink has seen one.
    pub fn sink_watermark(&self) -> Option<EventTime> {
        let marks = self
            .sink_watermarks
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        marks.iter().copied().min().filter(|m| *m > i64::MIN)
    }

    /// Operator subtasks that have state to restore and have not finished restoring
    /// it (each takes rows once it has; no checkpoint starts before all have).
    pub fn subtasks_restoring(&self) -> usize {
        let operators = self.operators.lock().unwrap_or_else(|e| e.into_inner());
        operators
            .iter()
            .filter(|(_, _, c)| c.is_restoring())
            .count()
    }

    /// Per-operator totals, in registration order, one row per operator.
    pub fn operator_totals(&self) -> Vec<OperatorTotals> {
        let operators = self.operators.lock().unwrap_or_else(|e| e.into_inner());
        let mut totals: Vec<OperatorTotals> = Vec::new();
        for (id, _, counters) in operators.iter() {
            let late = counters.late_rows_dropped.load(Ordering::Relaxed);
            let windows = counters.windows_emitted.load(Ordering::Relaxed);
            let skipped = counters.records_skipped.load(Ordering::Relaxed);
            let restore = counters.restore_time();
            match totals.iter_mut().find(|t| &t.operator == id) {
                Some(t) => {
                    t.late_rows_dropped += late;
                    t.windows_emitted += windows;
                    t.records_skipped += skipped;
                    t.restore_time = t.restore_time.max(restore);
                }
                None => totals.push(OperatorTotals {
                    operator: id.clone(),
                    late_rows_dropped: late,
                    windows_emitted: windows,
                    records_skipped: skipped,
                    restore_time: restore,
                }),
            }
        }
        totals
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_subtask_is_restoring_from_its_start_until_its_restore_is_timed() {
        let metrics = JobMetrics::default();
        let id = OperatorId("counts".into());
        let (a, b) = (
            metrics.register_operator(&id, 0),
            metrics.register_operator(&id, 1),
        );
        metrics.register_operator(&OperatorId("filter".into()), 0);
        a.note_restore_pending();
        b.note_restore_pending();
        assert_eq!(metrics.subtasks_restoring(), 2);
        a.set_restore_time(Duration::from_millis(300));
        assert_eq!(metrics.subtasks_restoring(), 1);
        b.set_restore_time(Duration::from_millis(700));
        assert_eq!(metrics.subtasks_restoring(), 0);
        let totals = metrics.operator_totals();
        // The operator's restore took as long as its slowest subtask's.
        assert_eq!(totals[0].restore_time, Some(Duration::from_millis(700)));
        assert_eq!(totals[1].restore_time, None, "it restored nothing");
    }

    #[test]
    fn word_of_an_older_commit_changes_nothing() {
        let metrics = JobMetrics::default();
        assert_eq!(metrics.completed(), None);
        metrics.checkpoint_completed(Epoch(7));
        // Words of two commits can arrive out of order (a late notice).
        metrics.checkpoint_completed(Epoch(5));
        assert_eq!(metrics.completed(), Some(Epoch(7)));
    }

    #[test]
    fn samples_list_operators_in_plan_order_each_with_its_subtasks_and_counters() {
        let metrics = JobMetrics::default();
        let (source, window) = (OperatorId("bids".into()), OperatorId("counts".into()));
        // Tasks register subtask by subtask: bids/0, counts/0, bids/1, counts/1.
        let flows: Vec<_> = [(&source, 0), (&window, 0), (&source, 1), (&window, 1)]
            .into_iter()
            .map(|(id, subtask)| metrics.register_flow(id, subtask))
            .collect();
        let counters = metrics.register_operator(&window, 1);
        counters.windows_emitted.fetch_add(3, Ordering::Relaxed);
        flows[3].received(10);
        flows[3].watermark_at(5);
        flows[3].watermark_at(4);
        let samples = metrics.subtask_samples();
        let order: Vec<(String, usize)> = samples
            .iter()
            .map(|s| (s.operator.0.clone(), s.subtask))
            .collect();
        assert_eq!(
            order,
            [("bids", 0), ("bids", 1), ("counts", 0), ("counts", 1)]
                .map(|(o, s)| (o.to_string(), s))
        );
        let last = &samples[3];
        assert_eq!((last.flow.rows_in, last.flow.batches_in), (10, 1));
        assert_eq!(last.flow.watermark, Some(5), "a watermark never goes back");
        assert_eq!(last.counters.map(|c| c.windows_emitted), Some(3));
        assert_eq!(samples[0].counters, None);
        assert_eq!(samples[0].flow.watermark, None);
    }
}
