//! The operator trait: what every stateful or stateless transformation implements.

use crate::error::Result;
use crate::message::Epoch;
use crate::schema::StreamSchema;
use crate::state::OperatorState;
use crate::time::EventTime;
use crate::RecordBatch;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// A stable operator id: survives restarts and plan edits that keep the operator.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OperatorId(pub String);

impl fmt::Display for OperatorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Counters an operator subtask reports; shared with the runtime's metrics.
#[derive(Debug, Default)]
pub struct OperatorCounters {
    /// Rows dropped because every window they belonged to had already closed.
    pub late_rows_dropped: AtomicU64,
    /// Windows (or sessions) fired and emitted.
    pub windows_emitted: AtomicU64,
    /// Malformed input records skipped (sources configured to skip them).
    pub records_skipped: AtomicU64,
    /// Records a source has yet to read, per split it reads (a Kafka partition as
    /// `topic/partition`), as of its latest news from the system it reads. Not
    /// checkpointed: it describes the outside world now.
    pending: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
    /// Bytes of state the subtask holds in memory, as of its last snapshot (0 for an
    /// operator that does not measure it). Not checkpointed.
    state_bytes_in_memory: AtomicU64,
    /// Bytes of state in its spill tier, as of its last snapshot. Not checkpointed.
    state_bytes_spilled: AtomicU64,
    /// How long the subtask's restore took, in nanoseconds (0: it restored nothing).
    /// Not checkpointed: it describes this run.
    restore_nanos: AtomicU64,
    /// Whether it has state to restore and has not finished restoring it.
    restoring: AtomicBool,
}

/// A stateful subtask's state bytes: in memory and in the spill tier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateBytes {
    /// In memory.
    pub in_memory: u64,
    /// In the local spill tier.
    pub spilled: u64,
}

/// The values of [`OperatorCounters`] at one moment (checkpointed at each barrier).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CounterValues {
    /// Rows dropped as late.
    pub late_rows_dropped: u64,
    /// Windows (or sessions) fired.
    pub windows_emitted: u64,
    /// Malformed input records skipped.
    pub records_skipped: u64,
}

impl CounterValues {
    /// The sum of `self` and `other`.
    pub fn plus(self, other: CounterValues) -> CounterValues {
        CounterValues {
            late_rows_dropped: self.late_rows_dropped + other.late_rows_dropped,
            windows_emitted: self.windows_emitted + other.windows_emitted,
            records_skipped: self.records_skipped + other.records_skipped,
        }
    }
}

impl OperatorCounters {
    /// The current values.
    pub fn values(&self) -> CounterValues {
        CounterValues {
            late_rows_dropped: self.late_rows_dropped.load(Ordering::Relaxed),
            windows_emitted: self.windows_emitted.load(Ordering::Relaxed),
            records_skipped: self.records_skipped.load(Ordering::Relaxed),
        }
    }

    /// Notes the subtask's state bytes now.
    pub fn set_state_bytes(&self, bytes: StateBytes) {
        self.state_bytes_in_memory
            .store(bytes.in_memory, Ordering::Relaxed);
        self.state_bytes_spilled
            .store(bytes.spilled, Ordering::Relaxed);
    }

    /// The subtask's state bytes as last noted.
    pub fn state_bytes(&self) -> StateBytes {
        StateBytes {
            in_memory: self.state_bytes_in_memory.load(Ordering::Relaxed),
            spilled: self.state_bytes_spilled.load(Ordering::Relaxed),
        }
    }

    /// Notes that the subtask has state to restore, before its task starts.
    pub fn note_restore_pending(&self) {
        self.restoring.store(true, Ordering::Relaxed);
    }

    /// Whether the subtask has state to restore and has not finished restoring it.
    pub fn is_restoring(&self) -> bool {
        self.restoring.load(Ordering::Relaxed)
    }

    /// Notes that the subtask restored its state, and how long that took.
    pub fn set_restore_time(&self, took: std::time::Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.restore_nanos.store(nanos, Ordering::Relaxed);
        self.restoring.store(false, Ordering::Relaxed);
    }

    /// How long the subtask took to restore its state, if it restored any.
    pub fn restore_time(&self) -> Option<std::time::Duration> {
        match self.restore_nanos.load(Ordering::Relaxed) {
            0 => None,
            nanos => Some(std::time::Duration::from_nanos(nanos)),
        }
    }

    /// Records split `split` has yet to read.
    pub fn set_pending(&self, split: &str, records: u64) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        match pending.get_mut(split) {
            Some(n) => *n = records,
            None => {
                pending.insert(split.to_string(), records);
            }
        }
    }

    /// Records each split has yet to read, by split.
    pub fn pending(&self) -> Vec<(String, u64)> {
        let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.iter().map(|(s, n)| (s.clone(), *n)).collect()
    }

    /// Adds restored values (a resumed run continues the checkpoint's totals).
    pub fn add_values(&self, values: CounterValues) {
        self.add_late(values.late_rows_dropped);
        self.add_windows(values.windows_emitted);
        self.add_skipped(values.records_skipped);
    }

    /// Adds `n` late rows.
    pub fn add_late(&self, n: u64) {
        if n > 0 {
            self.late_rows_dropped.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Adds `n` skipped malformed records.
    pub fn add_skipped(&self, n: u64) {
        if n > 0 {
            self.records_skipped.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Adds `n` fired windows.
    pub fn add_windows(&self, n: u64) {
        if n > 0 {
            self.windows_emitted.fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// Where one operator subtask runs.
#[derive(Debug, Clone)]
pub struct OperatorContext {
    /// The operator's stable id.
    pub operator_id: OperatorId,
    /// This subtask's index, `0..parallelism`.
    pub subtask: usize,
    /// How many subtasks the operator has.
    pub parallelism: usize,
    /// Number of key groups.
    pub max_parallelism: u16,
    /// Counters for this subtask.
    pub counters: Arc<OperatorCounters>,
    /// This subtask's share of `--state-memory`, if the job has a budget: operators that
    /// can spill keep their in-memory state within it (docs/engine.md, "State beyond
    /// memory").
    pub state_memory: Option<StateMemory>,
    /// The newest epoch the job committed, as this process heard it: an operator may
    /// stop holding state batches that committed snapshots wrote
    /// ([`crate::state::hand_over`]). Heard only by a
    /// [`stable_state`](OperatorFactory::stable_state) operator's subtasks, whose files
    /// the checkpoint writer reuses; never by others'.
    pub committed: crate::state::CommittedEpoch,
}

/// A stateful subtask's memory budget and where it may spill what does not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateMemory {
    /// Bytes of state the subtask keeps in memory.
    pub bytes: u64,
    /// A local directory for the spill tier: a cache a restart may lose, never the
    /// commit point (checkpoints stay that).
    pub spill_dir: std::path::PathBuf,
}

impl OperatorContext {
    /// A context outside any job (tools and tests): fresh counters, default key groups.
    pub fn detached(operator: &str, subtask: usize, parallelism: usize) -> Self {
        Self {
            operator_id: OperatorId(operator.to_string()),
            subtask,
            parallelism,
            max_parallelism: crate::DEFAULT_MAX_PARALLELISM,
            counters: Arc::new(OperatorCounters::default()),
            state_memory: None,
            committed: crate::state::CommittedEpoch::default(),
        }
    }
}

/// One subtask of an operator.
///
/// The runtime calls the hooks from a single task, never concurrently, in channel order:
/// - [`on_batch`](Operator::on_batch) for each data batch; during barrier alignment,
///   batches of an input that already delivered the barrier are held back, so every
///   batch seen before [`snapshot`](Operator::snapshot) belongs to the epoch.
/// - [`on_watermark`](Operator::on_watermark) whenever the minimum watermark over the
///   task's inputs advances; it never goes back. The runtime forwards the watermark
///   downstream *after* the call returns, so rows emitted here precede it.
/// - [`snapshot`](Operator::snapshot) when all inputs delivered a barrier, before the
///   barrier is forwarded.
/// - [`on_end`](Operator::on_end) once, after every input ended and a final
///   `on_watermark(i64::MAX)`.
pub trait Operator: Send {
    /// Processes rows from input `input` (0 for single-input operators; 0 = left and
    /// 1 = right for joins), appending any output to `out`.
    ///
    /// # Errors
    /// Any error fails the job, naming this operator and subtask.
    fn on_batch(
        &mut self,
        input: usize,
        batch: RecordBatch,
        out: &mut Vec<RecordBatch>,
    ) -> Result<()>;

    /// Event time advanced to `watermark`: fire what it closes.
    fn on_watermark(&mut self, _watermark: EventTime, _out: &mut Vec<RecordBatch>) -> Result<()> {
        Ok(())
    }

    /// The source this operator is chained to is about to declare itself idle: from then
    /// on, downstream tasks advance their watermark without waiting for this input, so
    /// an operator that holds rows back for its own watermark (a local pre-stage) must
    /// send them now. Called only in a source's chain.
    fn on_idle(&mut self, _out: &mut Vec<RecordBatch>) -> Result<()> {
        Ok(())
    }

    /// The watermark passed downstream after [`on_watermark`](Operator::on_watermark)
    /// of `input`: by default `input`. An operator that may still emit rows at or
    /// before `input` (an outer interval join's padded rows, emitted when their bound
    /// closes) holds it back to just before the oldest of them, so they are not late
    /// downstream (docs/engine.md, "Watermarks held back"). The runtime never lets the
    /// forwarded watermark go back.
    fn output_watermark(&self, input: EventTime) -> EventTime {
        input
    }

    /// All input is done; emit anything still held (after the final watermark).
    fn on_end(&mut self, _out: &mut Vec<RecordBatch>) -> Result<()> {
        Ok(())
    }

    /// The operator's state at a barrier, as Arrow batches partitioned by key group.
    /// Must be cheap: copy nothing that Arrow arrays already make immutable.
    fn snapshot(&mut self, _epoch: Epoch) -> Result<OperatorState> {
        Ok(OperatorState::default())
    }

    /// Rebuilds state from batches produced by [`snapshot`](Operator::snapshot) of this
    /// operator (possibly at another parallelism: only this subtask's key groups are
    /// passed). Called before any other hook.
    fn restore(&mut self, _state: OperatorState) -> Result<()> {
        Ok(())
    }

    /// Whether [`restore`](Operator::restore) may be called more than once before any
    /// other hook, each time with the next of the checkpoint's batches in order, the
    /// state then being as after one call with all of them. The runtime then decodes
    /// the checkpoint one batch at a time, so that restoring holds one decoded batch
    /// beside the operator's state, not the whole state decoded (docs/engine.md,
    /// "State beyond memory"). An operator whose state has no batches is restored once,
    /// with none.
    fn restores_in_parts(&self) -> bool {
        false
    }

    /// Ends a restore in parts, after its last part: an operator that defers work
    /// while parts come (the updating aggregate writes the groups it gathered for its
    /// spill tier) does it here, so that the restore's measured time includes it.
    fn finish_restore(&mut self) -> Result<()> {
        Ok(())
    }

    /// After a restore in parts from this subtask's own files, as the job's own
    /// checkpoint wrote them (same parallelism): `chain` holds the batches just
    /// restored, in order and [handed over](crate::hand_over), from files written by
    /// `snapshots` snapshots (epochs), each of which the checkpoint writer can
    /// reference as it is. An operator whose
    /// snapshots extend a chain of batches may go on from this one, so that its next
    /// snapshot holds only what changed, not its whole state; it returns whether it
    /// did. It must then count epoch `restored` as committed, as the writer does: the
    /// epoch before the run's first, which the restored state stands for. The default
    /// starts a new chain at the next snapshot.
    fn continue_chain(
        &mut self,
        _chain: Vec<RecordBatch>,
        _restored: Epoch,
        _snapshots: usize,
    ) -> bool {
        false
    }
}

/// Builds subtasks of one operator and describes it to the planner.
pub trait OperatorFactory: Send + Sync {
    /// Short description for `explain` and errors, e.g. `tumble(10s) count(*) by k`.
    fn describe(&self) -> String;

    /// Schema of the rows the operator emits.
    fn output_schema(&self) -> &StreamSchema;

    /// Number of inputs (1, or 2 for joins).
    fn input_count(&self) -> usize {
        1
    }

    /// What the emitted rows are, given what the inputs' are. By default: a changelog
    /// when the schema has a row-kind column; else upserts when a stateless operator
    /// (a projection, a filter) passes upserts on; else append-only. Operators that
    /// emit upserts themselves say so.
    fn output_kind(&self, inputs: &[crate::StreamKind]) -> crate::StreamKind {
        use crate::StreamKind;
        match StreamKind::of_schema(self.output_schema()) {
            StreamKind::AppendOnly
                if !self.is_stateful() && inputs.contains(&StreamKind::Upsert) =>
            {
                StreamKind::Upsert
            }
            kind => kind,
        }
    }

    /// Whether the operator holds state that checkpoints must capture.
    fn is_stateful(&self) -> bool;

    /// Whether its subtasks keep their state within their share of `--state-memory`
    /// (moving the rest to a spill tier). The budget is shared among these only; other
    /// stateful operators hold their state in memory outside it.
    fn keeps_to_state_memory(&self) -> bool {
        false
    }

    /// Whether [`Operator::snapshot`] returns a batch it returned before as the same
    /// arrays (`Arc`-shared) while that part of the state is unchanged. Checkpoints then
    /// reuse the files of such batches instead of writing them again (incremental
    /// checkpoints); append-only state such as a window join's buffers qualifies.
    fn stable_state(&self) -> bool {
        false
    }

    /// Columns the input at `input` must be partitioned by (keyed exchange), or `None`
    /// when any partitioning works.
    fn key_columns(&self, _input: usize) -> Option<Vec<usize>> {
        None
    }

    /// Creates one subtask.
    ///
    /// # Errors
    /// Configuration that can only be checked at run time.
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Operator>>;
}
