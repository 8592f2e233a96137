//! The updating aggregate's restore under a memory budget (docs/engine.md, "State
//! beyond memory", the restore larger than the budget). Groups restore into memory
//! while they fit. Once they do not, every group in memory moves to the tier, and the
//! rest of the restore goes straight there, gathered into sorted runs
//! ([`RestoredGroups`], [`SpillStore::ingest`](crate::spill::SpillStore::ingest)),
//! never through memory. A group comes back on its first touch, as any spilled group
//! does.
//!
//! Only where a group's later rows replace its earlier ones. A count DISTINCT set's
//! later rows may hold only what it gained, to be unioned in memory: such groups
//! restore through memory, the coldest spilling as they go.

use super::MAX_KEY_BYTES;
use crate::spill::RestoredGroups;
use crate::updating_aggregate::UpdatingAggregate;
use crate::window::state_columns;
use riffle_core::arrow::array::UInt32Array;
use riffle_core::arrow::compute::take_record_batch;
use riffle_core::arrow::datatypes::Fields;
use riffle_core::{Error, RecordBatch, Result};

/// The share of the budget restored groups may take before they are written as one
/// run: larger runs leave the tree fewer to merge.
const RUN_SHARE: (u64, u64) = (1, 2);

impl UpdatingAggregate {
    /// Restores one of the checkpoint's state batches, in order.
    pub(in crate::updating_aggregate) fn restore_batch(
        &mut self,
        batch: &RecordBatch,
    ) -> Result<()> {
        if self.tier.as_ref().is_some_and(|t| t.restoring.is_some()) {
            return self.restore_into_tier(batch);
        }
        self.restore_into_memory(batch)?;
        if self.over_budget() && self.may_restore_into_tier() {
            self.start_restoring_into_tier()
        } else {
            self.spill_if_over()
        }
    }

    /// Writes what a restore straight into the tier still holds: before anything else
    /// reads the tier or the groups in memory.
    ///
    /// # Errors
    /// The store failed.
    pub(in crate::updating_aggregate) fn end_restore(&mut self) -> Result<()> {
        let Some(tier) = &mut self.tier else {
            return Ok(());
        };
        let Some(mut pending) = tier.restoring.take() else {
            return Ok(());
        };
        let store = tier.store(&self.operator, self.subtask)?;
        store.ingest(&mut pending)?;
        store.recount()
    }

    /// Whether the rest of a restore may go straight into the tier.
    fn may_restore_into_tier(&self) -> bool {
        self.tier.is_some() && self.table.has_key_bytes() && self.accumulators.later_rows_replace()
    }

    /// The rows of `batch` into the groups in memory.
    fn restore_into_memory(&mut self, batch: &RecordBatch) -> Result<()> {
        let keys = state_columns(batch, self.key_schema.fields(), &self.operator)?;
        let rows: Vec<u32> = (0..batch.num_rows() as u32).collect();
        let mut groups = Vec::new();
        let known = self.table.len() as u32;
        self.table.intern(&keys, &rows, &mut groups)?;
        // A group spilled earlier in this restore takes its later rows in memory.
        self.take_back(known)?;
        self.accumulators.restore(&groups, batch, &self.operator)
    }

    /// Moves every group in memory the tier can hold into the restored groups, and
    /// restores the rest of the checkpoint into the tier from now on.
    fn start_restoring_into_tier(&mut self) -> Result<()> {
        let (leaving, kept): (Vec<u32>, Vec<u32>) =
            (0..self.table.len() as u32).partition(|&g| self.table.key_len(g) <= MAX_KEY_BYTES);
        let mut pending = RestoredGroups::default();
        for group in self.leaving(&leaving)? {
            pending.push(&group.key, &group.value);
        }
        self.keep_only(&kept)?;
        if let Some(tier) = &mut self.tier {
            tier.restoring = Some(pending);
        }
        self.write_run_if_full()
    }

    /// Adds the rows of `batch` to the restored groups; a row whose key is too long for
    /// the tier goes to memory (its key's later rows follow it there).
    fn restore_into_tier(&mut self, batch: &RecordBatch) -> Result<()> {
        let keys = state_columns(batch, self.key_schema.fields(), &self.operator)?;
        let tier = (self.tier.as_mut()).ok_or_else(|| Error::Spill("no tier".into()))?;
        let codec = tier.codec(&self.accumulators)?;
        let values = if codec.fields().is_empty() {
            None
        } else {
            let fields: Fields = codec.fields().iter().cloned().collect();
            let columns = state_columns(batch, &fields, &self.operator)?;
            Some(codec.encode_rows(&columns)?)
        };
        let pending =
            (tier.restoring.as_mut()).ok_or_else(|| Error::Spill("not restoring".into()))?;
        let mut too_long = Vec::new();
        self.table
            .for_each_key_bytes(&keys, batch.num_rows(), |row, key| {
                if key.len() > MAX_KEY_BYTES {
                    too_long.push(row as u32);
                } else {
                    let value = values.as_ref().map_or(&[][..], |v| v.row(row).data());
                    pending.push(key, value);
                }
            })?;
        if !too_long.is_empty() {
            let rows = take_record_batch(batch, &UInt32Array::from(too_long))?;
            self.restore_into_memory(&rows)?;
        }
        self.write_run_if_full()
    }

    /// Writes the restored groups as one run once they hold their share of the budget.
    fn write_run_if_full(&mut self) -> Result<()> {
        let Some(tier) = &mut self.tier else {
            return Ok(());
        };
        let share = tier.memory.bytes * RUN_SHARE.0 / RUN_SHARE.1;
        let full = (tier.restoring.as_ref()).is_some_and(|p| p.held_bytes() as u64 >= share);
        if !full {
            return Ok(());
        }
        let mut pending = tier.restoring.take().unwrap_or_default();
        tier.store(&self.operator, self.subtask)?
            .ingest(&mut pending)?;
        tier.restoring = Some(pending);
        Ok(())
    }
}
