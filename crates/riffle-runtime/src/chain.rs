//! A chain: operators (and possibly a sink) run back to back inside one task.

use crate::metrics::{FlowCounters, JobMetrics};
pub use crate::protocol::ChainError;
use crate::restored_chains::{ChainFile, ChainSeed};
use crate::restored_state::RestoredState;
use riffle_core::operator::OperatorCounters;
use riffle_core::{
    hand_over, CounterValues, Epoch, Error, EventTime, Operator, OperatorId, OperatorState,
    RecordBatch, Sink, SinkSummary,
};
use riffle_state::FileEntry;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// An operator in a chain, with its id for error messages.
pub struct ChainLink {
    /// The operator's stable id.
    pub id: OperatorId,
    /// The operator subtask.
    pub operator: Box<dyn Operator>,
    /// Checkpointed state to restore when the task starts (on its own thread, so the
    /// subtasks of a large state rebuild in parallel), decoded as it is restored.
    pub restore: Option<RestoredState>,
    /// The subtask's counters (checkpointed with its state).
    pub counters: Arc<OperatorCounters>,
    /// What flows through it (for metrics).
    pub flow: Arc<FlowCounters>,
}

/// The sink at the end of a chain.
pub struct ChainSink {
    /// The sink's stable id.
    pub id: OperatorId,
    /// The sink subtask.
    pub sink: Box<dyn Sink>,
    /// Its slot in [`JobMetrics`] for the watermark it has seen.
    pub watermark_slot: usize,
    /// What flows into it (for metrics).
    pub flow: Arc<FlowCounters>,
}

/// Operators run back to back; what the last emits is collected for the task to send.
pub struct Chain {
    links: Vec<ChainLink>,
    sink: Option<ChainSink>,
    emitted: Vec<RecordBatch>,
    metrics: Arc<JobMetrics>,
    tail: OperatorId,
    /// The heading source's flow, when a source heads the chain (its watermark is the
    /// one the chain is told).
    source_flow: Option<Arc<FlowCounters>>,
    /// Per link, the watermark it last passed on (the next link's last seen).
    forwarded: Vec<EventTime>,
}

type ChainResult<T> = std::result::Result<T, ChainError>;

fn at(id: &OperatorId) -> impl FnOnce(Error) -> ChainError + '_ {
    move |error| ChainError {
        operator: id.clone(),
        error,
    }
}

impl Chain {
    /// A chain of `links` after `head` (a source, with its flow counters, or the first
    /// link), ending in `sink` if there is one.
    pub fn new(
        head: OperatorId,
        source_flow: Option<Arc<FlowCounters>>,
        links: Vec<ChainLink>,
        sink: Option<ChainSink>,
        metrics: Arc<JobMetrics>,
    ) -> Self {
        let tail = links.last().map_or(head, |l| l.id.clone());
        Self {
            forwarded: vec![EventTime::MIN; links.len()],
            links,
            sink,
            emitted: Vec::new(),
            metrics,
            tail,
            source_flow,
        }
    }

    /// The operator whose output leaves the chain.
    pub fn tail(&self) -> &OperatorId {
        &self.tail
    }

    /// Batches the chain's tail emitted since the last call (empty when it ends in a sink).
    pub fn take_emitted(&mut self) -> Vec<RecordBatch> {
        std::mem::take(&mut self.emitted)
    }

    /// Feeds a batch into the head of the chain from head input `input`.
    pub fn on_batch(&mut self, input: usize, batch: RecordBatch) -> ChainResult<()> {
        self.push(0, input, batch)
    }

    fn push(&mut self, level: usize, input: usize, batch: RecordBatch) -> ChainResult<()> {
        if level == self.links.len() {
            return self.deliver(batch);
        }
        let mut out = Vec::new();
        let link = &mut self.links[level];
        link.flow.received(batch.num_rows());
        link.operator
            .on_batch(input, batch, &mut out)
            .map_err(at(&link.id))?;
        link.flow.emitted(&out);
        for b in out {
            self.push(level + 1, 0, b)?;
        }
        Ok(())
    }

    fn deliver(&mut self, batch: RecordBatch) -> ChainResult<()> {
        match &mut self.sink {
            Some(sink) => {
                self.metrics
                    .sink_rows
                    .fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
                sink.flow.received(batch.num_rows());
                sink.sink.write(&batch).map_err(at(&sink.id))
            }
            None => {
                self.emitted.push(batch);
                Ok(())
            }
        }
    }

    /// The combined watermark advanced: each operator in turn fires, its output flowing
    /// through the rest of the chain before the next operator sees the watermark. Each
    /// operator passes on the watermark it chooses ([`Operator::output_watermark`]);
    /// returns the one the chain's tail passes on, for the downstream tasks.
    pub fn on_watermark(&mut self, watermark: EventTime) -> ChainResult<EventTime> {
        if let Some(flow) = &self.source_flow {
            flow.watermark_at(watermark);
        }
        let mut watermark = watermark;
        for level in 0..self.links.len() {
            let mut out = Vec::new();
            let link = &mut self.links[level];
            link.operator
                .on_watermark(watermark, &mut out)
                .map_err(at(&link.id))?;
            link.flow.watermark_at(watermark);
            link.flow.emitted(&out);
            // A watermark never goes back, even when an operator holds it.
            let held = link.operator.output_watermark(watermark);
            watermark = held.max(self.forwarded[level]).min(watermark);
            self.forwarded[level] = watermark;
            for b in out {
                self.push(level + 1, 0, b)?;
            }
        }
        if let Some(sink) = &mut self.sink {
            self.metrics
                .set_sink_watermark(sink.watermark_slot, watermark);
            sink.flow.watermark_at(watermark);
            sink.sink.on_watermark(watermark).map_err(at(&sink.id))?;
        }
        Ok(watermark)
    }

    /// The source is about to declare itself idle: each operator in turn sends what it
    /// holds back for its own watermark ([`Operator::on_idle`]), through the rest of the
    /// chain.
    pub fn on_idle(&mut self) -> ChainResult<()> {
        for level in 0..self.links.len() {
            let mut out = Vec::new();
            let link = &mut self.links[level];
            link.operator.on_idle(&mut out).map_err(at(&link.id))?;
            link.flow.emitted(&out);
            for b in out {
                self.push(level + 1, 0, b)?;
            }
        }
        Ok(())
    }

    /// The links that saw a lower watermark than `task_watermark` (the task's input),
    /// since a link before them held it back, with the watermark each saw. A restore
    /// resumes them from there, so the rows held back are not late after it.
    pub fn held_watermarks(&self, task_watermark: EventTime) -> Vec<(OperatorId, EventTime)> {
        // The first link sees the task's watermark; each later one what the link before
        // it passed on.
        (self.links.iter().skip(1).zip(&self.forwarded))
            .filter(|(_, seen)| **seen < task_watermark)
            .map(|(link, seen)| (link.id.clone(), *seen))
            .collect()
    }

    /// Input ended (after the final watermark): flush every operator, then the sink.
    pub fn on_end(&mut self) -> ChainResult<Option<(OperatorId, SinkSummary)>> {
        for level in 0..self.links.len() {
            let mut out = Vec::new();
            let link = &mut self.links[level];
            link.operator.on_end(&mut out).map_err(at(&link.id))?;
            link.flow.emitted(&out);
            for b in out {
                self.push(level + 1, 0, b)?;
            }
        }
        match &mut self.sink {
            Some(sink) => {
                let summary = sink.sink.finish().map_err(at(&sink.id))?;
                Ok(Some((sink.id.clone(), summary)))
            }
            None => Ok(None),
        }
    }

    /// Restores every operator that has checkpointed state; called once, before any input.
    ///
    /// An operator that [restores in parts](Operator::restores_in_parts) gets one
    /// decoded batch at a time, so the whole state is never decoded at once; others
    /// get it whole.
    pub fn restore_pending(&mut self) -> ChainResult<()> {
        for link in &mut self.links {
            let Some(state) = link.restore.take() else {
                continue;
            };
            let started = std::time::Instant::now();
            restore_link(link, &state)?;
            link.counters.set_restore_time(started.elapsed());
        }
        Ok(())
    }

    /// Every operator's counters now (at a barrier, they belong to the epoch).
    pub fn counters(&self) -> Vec<(OperatorId, CounterValues)> {
        self.links
            .iter()
            .map(|l| (l.id.clone(), l.counters.values()))
            .collect()
    }

    /// Snapshots every operator of the chain at `epoch`.
    pub fn snapshot(&mut self, epoch: Epoch) -> ChainResult<Vec<(OperatorId, OperatorState)>> {
        let mut states = Vec::with_capacity(self.links.len());
        for link in &mut self.links {
            let state = link.operator.snapshot(epoch).map_err(at(&link.id))?;
            states.push((link.id.clone(), state));
        }
        Ok(states)
    }

    /// Pre-commits the chain's sink at `epoch`: its id and committable payload, if any.
    pub fn pre_commit(&mut self, epoch: Epoch) -> ChainResult<Option<(OperatorId, String)>> {
        let Some(sink) = &mut self.sink else {
            return Ok(None);
        };
        let payload = sink.sink.pre_commit(epoch).map_err(at(&sink.id))?;
        Ok(payload.map(|p| (sink.id.clone(), p)))
    }
}

/// Restores `link`'s operator from `state`: whole, or in parts, one decoded batch at a
/// time, ended by [`Operator::finish_restore`] and offering the operator the chain of
/// its own files.
fn restore_link(link: &mut ChainLink, state: &RestoredState) -> ChainResult<()> {
    let unreadable = |message| Error::State {
        operator: link.id.0.clone(),
        message,
    };
    if !link.operator.restores_in_parts() {
        let whole = state.decode().map_err(unreadable).map_err(at(&link.id))?;
        return link.operator.restore(whole).map_err(at(&link.id));
    }
    let mut restored_any = false;
    // Its own files as written: what it restored, handed over, file by file.
    let mut chain = state.seed().map(|_| Vec::<ChainFile>::new());
    for (file, batch) in state.batches_in_files() {
        let batch = batch.map_err(unreadable).map_err(at(&link.id))?;
        if !chain
            .as_mut()
            .is_none_or(|files| note_in_chain(files, file, &batch))
        {
            chain = None; // a batch from no file: nothing to reference
        }
        let part = OperatorState::of(vec![batch]);
        link.operator.restore(part).map_err(at(&link.id))?;
        restored_any = true;
    }
    if !restored_any {
        // Restored, from nothing: as after a restore of an empty state.
        let nothing = OperatorState::default();
        link.operator.restore(nothing).map_err(at(&link.id))?;
    }
    link.operator.finish_restore().map_err(at(&link.id))?;
    if let (Some(seed), Some(files)) = (state.seed(), chain) {
        offer_restored_files(link.operator.as_mut(), seed, files);
    }
    Ok(())
}

/// Notes `batch`, restored from `file`, in the list of state files a subtask restored;
/// false for a batch that came from no file.
fn note_in_chain(
    files: &mut Vec<ChainFile>,
    file: Option<&FileEntry>,
    batch: &RecordBatch,
) -> bool {
    let Some(file) = file else {
        return false;
    };
    match files.last_mut() {
        Some((last, batches)) if last.path == file.path => batches.push(hand_over(batch)),
        _ => files.push((file.clone(), vec![hand_over(batch)])),
    }
    true
}

/// The snapshots that wrote a subtask's `files`: one per epoch directory, since a
/// snapshot may write several files (a streamed part's), all in its epoch's.
fn snapshots_of(files: &[ChainFile]) -> usize {
    let directories: std::collections::HashSet<&str> = files
        .iter()
        .map(|(file, _)| file.path.rsplit_once('/').map_or("", |(dir, _)| dir))
        .collect();
    directories.len()
}

/// Offers `operator` the chain of `files` it restored, and notes it for the writer of
/// its acks if the operator goes on from it ([`crate::restored_chains`]).
fn offer_restored_files(operator: &mut dyn Operator, seed: &ChainSeed, files: Vec<ChainFile>) {
    if files.is_empty() {
        return;
    }
    let batches = files.iter().flat_map(|(_, b)| b.iter().cloned()).collect();
    if operator.continue_chain(batches, seed.chains.epoch(), snapshots_of(&files)) {
        seed.chains.continued(&seed.operator, seed.subtask, files);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_snapshot_that_wrote_several_files_counts_once_in_a_restored_chain() {
        let file = |path: &str| {
            let entry = riffle_state::manifest::FileEntry {
                path: path.into(),
                rows: 1,
                bytes: 1,
                crc32c: 0,
            };
            (entry, Vec::new())
        };
        let files = [
            file("checkpoints/epoch=000004/agg/000-g1-0.parquet"),
            file("checkpoints/epoch=000004/agg/000-g1-1.parquet"),
            file("checkpoints/epoch=000004/agg/000-g1-2.parquet"),
            file("checkpoints/epoch=000005/agg/000-g1-0.parquet"),
        ];
        assert_eq!(super::snapshots_of(&files), 2);
    }

    use super::*;
    use std::sync::Mutex;

    /// Passes on `pass(input)`, logging the watermarks it sees.
    struct Passes {
        pass: fn(EventTime) -> EventTime,
        seen: Arc<Mutex<Vec<EventTime>>>,
    }

    impl Operator for Passes {
        fn on_batch(
            &mut self,
            _: usize,
            _: RecordBatch,
            _: &mut Vec<RecordBatch>,
        ) -> Result<(), Error> {
            Ok(())
        }
        fn on_watermark(&mut self, w: EventTime, _: &mut Vec<RecordBatch>) -> Result<(), Error> {
            self.seen.lock().unwrap().push(w);
            Ok(())
        }
        fn output_watermark(&self, input: EventTime) -> EventTime {
            (self.pass)(input)
        }
    }

    /// A chain of links passing on `passes[i](input)`, and what each saw.
    fn chain(passes: &[fn(EventTime) -> EventTime]) -> (Chain, Vec<Arc<Mutex<Vec<EventTime>>>>) {
        let metrics = Arc::new(JobMetrics::default());
        let mut seen = Vec::new();
        let links = passes
            .iter()
            .enumerate()
            .map(|(i, &pass)| {
                let id = OperatorId(format!("op{i}"));
                let log = Arc::new(Mutex::new(Vec::new()));
                seen.push(log.clone());
                ChainLink {
                    operator: Box::new(Passes { pass, seen: log }),
                    restore: None,
                    counters: metrics.register_operator(&id, 0),
                    flow: metrics.register_flow(&id, 0),
                    id,
                }
            })
            .collect();
        let head = OperatorId("op0".into());
        (Chain::new(head, None, links, None, metrics), seen)
    }

    #[test]
    fn an_operator_that_holds_the_watermark_holds_it_for_the_rest_of_the_chain() {
        let (mut chain, seen) = chain(&[|w| w - 100, |w| w]);
        assert_eq!(chain.on_watermark(1_000).ok().unwrap(), 900);
        assert_eq!(*seen[1].lock().unwrap(), vec![900]);
        // What each link saw is what a restore resumes it from.
        assert_eq!(
            chain.held_watermarks(1_000),
            vec![(OperatorId("op1".into()), 900)]
        );
    }

    #[test]
    fn a_held_watermark_never_goes_back() {
        // Passes on 500 below 1_000, 200 below 2_000, 9_000 (past its input) after.
        let (mut chain, _) = chain(&[|w| {
            if w <= 1_000 {
                500
            } else if w <= 2_000 {
                200
            } else {
                9_000
            }
        }]);
        assert_eq!(chain.on_watermark(1_000).ok().unwrap(), 500);
        assert_eq!(chain.on_watermark(2_000).ok().unwrap(), 500);
        // Nor past the input.
        assert_eq!(chain.on_watermark(3_000).ok().unwrap(), 3_000);
    }
}
