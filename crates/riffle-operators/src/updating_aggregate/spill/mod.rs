//! The updating aggregate under a memory budget (docs/engine.md, "State beyond memory"):
//! when its groups outgrow the subtask's share of `--state-memory`, the coldest ones
//! move to the spill tier, and a group that comes back is taken from there before its
//! rows are applied.
//!
//! Any group may leave, at any time. One that the checkpoint chain does not hold as it
//! is now (new or changed since the last snapshot, [`DeltaLog::held_by_chain`]) leaves
//! noted as changed, and the next snapshot reads it back from the tier into its delta
//! ([`SpillStore::drain_changed`]); its tier copy holds whole count DISTINCT sets,
//! which a restore unions with the chain's. A snapshot that starts a new chain writes
//! the spilled groups too, from the tier: in pieces over the next snapshots while the
//! old chain stays (a rolling restart), so that they are never all in memory at once;
//! all at once only when there is no old chain to keep (`snapshot.rs`).

mod restore;
mod snapshot;

use super::UpdatingAggregate;
use crate::aggregate::{AccumulatorSet, DistinctValues, GroupKeys};
use crate::spill::{Leaving, RestoredGroups, SpillStore, ValueCodec};
use riffle_core::arrow::array::{ArrayRef, BooleanArray};
use riffle_core::arrow::compute::filter_record_batch;
use riffle_core::arrow::datatypes::{Field, Schema};
use riffle_core::{Error, RecordBatch, Result, StateMemory};
use snapshot::Rolled;
use std::sync::Arc;

/// The longest key the tier takes (the LSM tree's keys are at most 64 KiB): groups
/// with longer keys stay in memory.
const MAX_KEY_BYTES: usize = 60 * 1024;

/// Input rows between measurements of memory, at least (fewer in tests, so that a few
/// hundred small batches spill between snapshots).
const MIN_CHECK_ROWS: usize = if cfg!(test) { 64 } else { 8192 };

/// A spill leaves this share of the budget in use, so that spills come in bulk.
const AFTER_SPILL: (u64, u64) = (3, 4);

/// The budget and the tier of one subtask.
pub(super) struct Tier {
    memory: StateMemory,
    /// Opened at the first spill.
    store: Option<SpillStore>,
    /// The state columns' encoding, made at the first spill.
    codec: Option<ValueCodec>,
    /// Per group id, the clock when last touched: the coldest spill first.
    touched: Vec<u64>,
    clock: u64,
    /// Input rows since memory was last measured.
    rows_since_check: usize,
    /// While the delta log rolls: how far the tier is in the new chain.
    rolled: Option<Rolled>,
    /// Snapshots the current rolling restart has written pieces in.
    roll_snapshots: usize,
    /// While a restore goes straight into the tier: the groups not yet written.
    restoring: Option<RestoredGroups>,
}

impl Tier {
    pub(super) fn new(memory: StateMemory) -> Self {
        Self {
            memory,
            store: None,
            codec: None,
            touched: Vec::new(),
            clock: 0,
            rows_since_check: 0,
            rolled: None,
            roll_snapshots: 0,
            restoring: None,
        }
    }

    /// The tier's store, opened at its first use.
    ///
    /// # Errors
    /// The store cannot open.
    fn store(&mut self, operator: &str, subtask: usize) -> Result<&mut SpillStore> {
        if self.store.is_none() {
            self.store = Some(SpillStore::open(&self.memory, operator, subtask)?);
        }
        self.store
            .as_mut()
            .ok_or_else(|| Error::Spill("no store".into()))
    }

    /// The encoding of `accumulators`' state columns, made at its first use.
    ///
    /// # Errors
    /// A state column Arrow's row format cannot hold.
    fn codec(&mut self, accumulators: &AccumulatorSet) -> Result<&ValueCodec> {
        if self.codec.is_none() {
            let state = accumulators.state_columns(&[], DistinctValues::All)?;
            self.codec = Some(ValueCodec::new(
                state.into_iter().map(|(f, _)| f).collect(),
            )?);
        }
        self.codec
            .as_ref()
            .ok_or_else(|| Error::Spill("no value codec".into()))
    }

    /// Groups in the tier.
    pub(super) fn spilled(&self) -> usize {
        self.store.as_ref().map_or(0, SpillStore::len)
    }

    /// Groups noted as changed in the tier, at most (the next snapshot's to write).
    pub(super) fn noted_changed(&self) -> usize {
        self.store.as_ref().map_or(0, SpillStore::noted_changed)
    }

    /// Bytes of the groups in the tier.
    pub(super) fn spilled_bytes(&self) -> u64 {
        self.store.as_ref().map_or(0, SpillStore::bytes)
    }

    /// Notes that `groups` were touched by the current input batch.
    pub(super) fn touch(&mut self, groups: &[u32], len: usize) {
        self.clock += 1;
        self.touched.resize(len, 0);
        for &g in groups {
            self.touched[g as usize] = self.clock;
        }
    }

    /// Whether memory is due to be measured after `rows` more input rows with `groups`
    /// groups in memory (often enough to hold the budget, rarely enough to cost nothing).
    pub(super) fn due(&mut self, rows: usize, groups: usize) -> bool {
        self.rows_since_check += rows;
        if self.rows_since_check >= (groups / 8).max(MIN_CHECK_ROWS) {
            self.rows_since_check = 0;
            true
        } else {
            false
        }
    }
}

impl UpdatingAggregate {
    /// Bytes the groups in memory hold.
    pub(super) fn memory_size(&self) -> usize {
        self.table.memory_size() + self.accumulators.memory_size()
    }

    /// Takes back from the tier every group among ids `first_new..` (new in memory)
    /// that is there, its accumulators restored; returns their ids, ascending.
    pub(super) fn take_back(&mut self, first_new: u32) -> Result<Vec<u32>> {
        let Some(tier) = &mut self.tier else {
            return Ok(Vec::new());
        };
        let (Some(store), Some(codec)) = (&mut tier.store, &tier.codec) else {
            return Ok(Vec::new());
        };
        if store.len() == 0 {
            return Ok(Vec::new());
        }
        let new = first_new..self.table.len() as u32;
        let keys: Vec<Vec<u8>> = new
            .clone()
            .map(|id| {
                let mut key = Vec::new();
                self.table.key_bytes(id, &mut key);
                key
            })
            .collect();
        let (mut ids, mut values) = (Vec::new(), Vec::new());
        for (id, value) in new.zip(store.take_all(&keys)?) {
            if let Some(value) = value {
                ids.push(id);
                values.push(value);
            }
        }
        if !ids.is_empty() && !codec.fields().is_empty() {
            let values: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
            let state = codec.fields().iter().cloned().zip(codec.decode(&values)?);
            let batch = named_columns(state.collect())?;
            self.accumulators.restore(&ids, &batch, &self.operator)?;
        }
        Ok(ids)
    }

    /// Whether the groups in memory hold more than the budget.
    fn over_budget(&self) -> bool {
        self.tier
            .as_ref()
            .is_some_and(|t| self.memory_size() as u64 > t.memory.bytes)
    }

    /// Moves the coldest groups to the tier when memory is over the budget, down to
    /// [`AFTER_SPILL`] of it.
    pub(super) fn spill_if_over(&mut self) -> Result<()> {
        let Some(tier) = &self.tier else {
            return Ok(());
        };
        let len = self.table.len();
        let memory = self.memory_size() as u64;
        if len == 0 || memory <= tier.memory.bytes || !self.table.has_key_bytes() {
            return Ok(());
        }
        let per_group = (memory / len as u64).max(1);
        let keep = (tier.memory.bytes * AFTER_SPILL.0 / AFTER_SPILL.1 / per_group) as usize;
        let mut leaving: Vec<u32> = (0..len as u32)
            .filter(|&g| self.table.key_len(g) <= MAX_KEY_BYTES)
            .collect();
        let n = len.saturating_sub(keep).min(leaving.len());
        if n == 0 {
            return Ok(());
        }
        let touched = |g: &u32| tier.touched.get(*g as usize).copied().unwrap_or(0);
        if n < leaving.len() {
            leaving.select_nth_unstable_by_key(n - 1, touched);
            leaving.truncate(n);
        }
        leaving.sort_unstable();
        let kept = complement(&leaving, len);
        self.spill(&leaving)?;
        self.keep_only(&kept)
    }

    /// Writes groups `ids` (ascending) to the tier, those the chain does not hold as
    /// they are noted as changed.
    fn spill(&mut self, ids: &[u32]) -> Result<()> {
        let groups = self.leaving(ids)?;
        let Some(tier) = &mut self.tier else {
            return Ok(());
        };
        tier.store(&self.operator, self.subtask)?.put_all(groups)
    }

    /// Groups `ids` as they leave memory: key bytes, encoded state, and whether the
    /// chain holds them as they are.
    fn leaving(&mut self, ids: &[u32]) -> Result<Vec<Leaving>> {
        let state = self.accumulators.state_columns(ids, DistinctValues::All)?;
        let Some(tier) = &mut self.tier else {
            return Ok(Vec::new());
        };
        let codec = tier.codec(&self.accumulators)?;
        let values = if codec.fields().is_empty() {
            vec![Vec::new(); ids.len()]
        } else {
            let columns: Vec<ArrayRef> = state.into_iter().map(|(_, c)| c).collect();
            codec.encode(&columns)?
        };
        Ok(ids
            .iter()
            .zip(values)
            .map(|(&id, value)| {
                let mut key = Vec::new();
                self.table.key_bytes(id, &mut key);
                Leaving {
                    key,
                    value,
                    changed: !self.delta.held_by_chain(id),
                }
            })
            .collect())
    }

    /// Rebuilds memory with only groups `kept` (ascending old ids), renumbered `0..`.
    fn keep_only(&mut self, kept: &[u32]) -> Result<()> {
        let keys = self.table.keys(kept)?;
        let state = self.accumulators.state_columns(kept, DistinctValues::All)?;
        let mut table = GroupKeys::new(self.key_schema.clone())?;
        let mut accumulators = AccumulatorSet::new(&self.aggregates);
        let rows: Vec<u32> = (0..kept.len() as u32).collect();
        let mut ids = Vec::new();
        table.intern(&keys, &rows, &mut ids)?;
        // Once a snapshot was taken, sets note what they gain for the chain it
        // continued; a kept group that changed since then keeps its gains noted (whole
        // sets: a restore takes the union).
        let noting = !self.delta.batches.is_empty();
        let changed: Vec<bool> = kept.iter().map(|&g| !self.delta.held_by_chain(g)).collect();
        match (!state.is_empty())
            .then(|| named_columns(state))
            .transpose()?
        {
            Some(batch) if noting => {
                let (held, not_held) = split_rows(&batch, &ids, &changed)?;
                accumulators.restore(&held.0, &held.1, &self.operator)?;
                accumulators.ensure(kept.len());
                accumulators.note_snapshot_taken();
                accumulators.restore(&not_held.0, &not_held.1, &self.operator)?;
            }
            Some(batch) => accumulators.restore(&ids, &batch, &self.operator)?,
            None if noting => {
                accumulators.ensure(kept.len());
                accumulators.note_snapshot_taken();
            }
            None => {}
        }
        accumulators.ensure(kept.len());
        self.table = table;
        self.accumulators = accumulators;
        self.delta.retain(kept);
        if let Some(tier) = &mut self.tier {
            tier.touched = kept
                .iter()
                .map(|&g| tier.touched.get(g as usize).copied().unwrap_or(0))
                .collect();
        }
        Ok(())
    }
}

/// State columns as a batch, named as snapshots name them (what an accumulator set
/// restores from).
fn named_columns(state: Vec<(Field, ArrayRef)>) -> Result<RecordBatch> {
    let (fields, columns): (Vec<Field>, Vec<ArrayRef>) = state.into_iter().unzip();
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

/// The rows of `batch` (of groups `ids`) split by `changed`: the unchanged rows and
/// their ids, then the changed ones.
type Rows = (Vec<u32>, RecordBatch);
fn split_rows(batch: &RecordBatch, ids: &[u32], changed: &[bool]) -> Result<(Rows, Rows)> {
    let part = |want: bool| -> Result<Rows> {
        let mask = BooleanArray::from_iter(changed.iter().map(|&c| Some(c == want)));
        let ids = (ids.iter().zip(changed))
            .filter(|(_, &c)| c == want)
            .map(|(&id, _)| id)
            .collect();
        Ok((ids, filter_record_batch(batch, &mask)?))
    };
    Ok((part(false)?, part(true)?))
}

/// The ids `0..len` not in `ids` (ascending).
fn complement(ids: &[u32], len: usize) -> Vec<u32> {
    let mut out = Vec::with_capacity(len - ids.len());
    let mut next = ids.iter().peekable();
    for g in 0..len as u32 {
        if next.peek() == Some(&&g) {
            next.next();
        } else {
            out.push(g);
        }
    }
    out
}

#[cfg(test)]
mod tests;
