//! A stream join's state: each stored batch as a state batch of its rows (as a struct
//! column named after the side) and their key groups, handed out again unchanged by
//! later snapshots (incremental); an outer interval join's also carry matched flags,
//! so they are written whole each time.

use super::{StreamJoin, MATCHED_FIELD};
use crate::delta_log::MAX_CHAIN;
use riffle_core::arrow::array::{ArrayRef, AsArray, BooleanArray, StructArray, UInt16Array};
use riffle_core::arrow::datatypes::{DataType, Field, Schema};
use riffle_core::state::KEY_GROUP_FIELD;
use riffle_core::{Error, OperatorState, RecordBatch, Result};
use std::sync::Arc;

/// The state batches of one side's stored batches, made for earlier snapshots.
#[derive(Default)]
pub(super) struct SideSnapshots {
    /// `batches[i]` is the state batch of stored batch `i`.
    pub(super) batches: Vec<RecordBatch>,
    /// Snapshots that added batches since the side was last written whole (files).
    pub(super) chain: usize,
}

impl StreamJoin {
    /// Stored batch `batch` of `side` as a state batch: its rows' key groups, and the
    /// rows as a struct column (sharing their arrays) named after the side; with a time
    /// condition and an outer side, whether each row matched (`matched`).
    fn state_batch(&self, side: usize, batch: usize) -> Result<RecordBatch> {
        let rows = &self.stored[side][batch];
        let name = if side == 0 { "left" } else { "right" };
        let row_fields = self.sides[side].schema.fields().clone();
        let mut fields = vec![
            Field::new(KEY_GROUP_FIELD, DataType::UInt16, false),
            Field::new(name, DataType::Struct(row_fields.clone()), false),
        ];
        if self.tracks_matches() {
            fields.push(Field::new(MATCHED_FIELD, DataType::Boolean, false));
        }
        let schema = Arc::new(Schema::new(fields));
        let keys = self.key_columns(side, rows)?;
        let (_, kg) =
            crate::window::key_group_column(&keys, rows.num_rows(), self.max_parallelism)?;
        let kg: UInt16Array = kg
            .as_primitive::<riffle_core::arrow::datatypes::UInt16Type>()
            .clone();
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(kg),
            Arc::new(StructArray::new(row_fields, rows.columns().to_vec(), None)),
        ];
        if self.tracks_matches() {
            let flags = self.matched[side].flags(batch);
            columns.push(Arc::new(BooleanArray::from(flags.to_vec())));
        }
        Ok(RecordBatch::try_new(schema, columns)?)
    }

    /// The state at a barrier (see [`Operator::snapshot`]).
    pub(super) fn snapshot_state(&mut self) -> Result<OperatorState> {
        if self.tracks_matches() {
            // Matched flags change: every stored batch is written again.
            let batches = (0..2)
                .flat_map(|side| (0..self.stored[side].len()).map(move |b| (side, b)))
                .map(|(side, b)| self.state_batch(side, b))
                .collect::<Result<Vec<_>>>()?;
            return Ok(OperatorState::of(batches));
        }
        let mut batches = Vec::new();
        for side in 0..2 {
            let mut made = std::mem::take(&mut self.snapshots[side]);
            if made.chain >= MAX_CHAIN {
                // New arrays for every row: written whole, as one file.
                made = SideSnapshots::default();
            }
            // On an error `made` is dropped: the next snapshot writes the side whole.
            let fresh = (made.batches.len()..self.stored[side].len())
                .map(|b| self.state_batch(side, b))
                .collect::<Result<Vec<_>>>()?;
            if !fresh.is_empty() {
                made.chain += 1;
                made.batches.extend(fresh);
            }
            batches.extend(made.batches.iter().cloned());
            self.snapshots[side] = made;
        }
        Ok(OperatorState::of(batches))
    }

    /// Rebuilds the state a snapshot made (see [`Operator::restore`]).
    pub(super) fn restore_state(&mut self, state: OperatorState) -> Result<()> {
        let mut ignored = Vec::new();
        for batch in state.batches {
            let (side, rows) = match (batch.column_by_name("left"), batch.column_by_name("right")) {
                (Some(l), _) => (0, l.clone()),
                (_, Some(r)) => (1, r.clone()),
                _ => {
                    return Err(Error::State {
                        operator: self.operator.clone(),
                        message: "state batch has neither `left` nor `right`".into(),
                    })
                }
            };
            let rows = RecordBatch::try_new(
                self.sides[side].schema.clone(),
                rows.as_struct().columns().to_vec(),
            )?;
            // Re-adding restores the index; matches were emitted before the snapshot.
            self.index(side, rows, &mut ignored, false)?;
            if let Some(flags) = batch.column_by_name(MATCHED_FIELD) {
                if let Some(flags) = flags.as_boolean_opt() {
                    self.matched[side].set_last(flags);
                }
            }
        }
        Ok(())
    }
}
