//! Live counters of a running job, read by the progress line and the run summary.

use riffle_core::operator::OperatorCounters;
use riffle_core::{EventTime, OperatorId};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Counters shared by every task of a job.
#[derive(Debug)]
pub struct JobMetrics {
    /// Rows produced by all source subtasks.
    pub source_rows: AtomicU64,
    /// Rows written by all sink subtasks.
    pub sink_rows: AtomicU64,
    /// Largest event time any source has emitted.
    pub source_max_event_time: AtomicI64,
    /// Newest epoch the coordinator committed (0: none yet); sources are told.
    pub completed_epoch: AtomicU64,
    sink_watermarks: Mutex<Vec<i64>>,
    operators: Mutex<Vec<(OperatorId, usize, Arc<OperatorCounters>)>>,
}

impl Default for JobMetrics {
    fn default() -> Self {
        Self {
            source_rows: AtomicU64::new(0),
            sink_rows: AtomicU64::new(0),
            source_max_event_time: AtomicI64::new(i64::MIN),
            completed_epoch: AtomicU64::new(0),
            sink_watermarks: Mutex::new(Vec::new()),
            operators: Mutex::new(Vec::new()),
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
}

impl JobMetrics {
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

    /// Per-operator totals, in registration order, one row per operator.
    pub fn operator_totals(&self) -> Vec<OperatorTotals> {
        let operators = self.operators.lock().unwrap_or_else(|e| e.into_inner());
        let mut totals: Vec<OperatorTotals> = Vec::new();
        for (id, _, counters) in operators.iter() {
            let late = counters.late_rows_dropped.load(Ordering::Relaxed);
            let windows = counters.windows_emitted.load(Ordering::Relaxed);
            let skipped = counters.records_skipped.load(Ordering::Relaxed);
            match totals.iter_mut().find(|t| &t.operator == id) {
                Some(t) => {
                    t.late_rows_dropped += late;
                    t.windows_emitted += windows;
                    t.records_skipped += skipped;
                }
                None => totals.push(OperatorTotals {
                    operator: id.clone(),
                    late_rows_dropped: late,
                    windows_emitted: windows,
                    records_skipped: skipped,
                }),
            }
        }
        totals
    }
}
