//! Upserts into a changelog (Flink's ChangelogNormalize): an upsert topic says only
//! "this key's row is now R" (`+U`) or "this key is gone" (`-D`, key columns only);
//! keyed by the primary key, this operator keeps each key's current row and emits what
//! changed — `+I` for a new key, `-U` old/`+U` new for a changed one, `-D` with the old
//! row for a deleted one — so every operator downstream reads an ordinary changelog.
//! A row equal to the current one changes nothing and emits nothing, a delete of an
//! unknown key neither (a topic compacted before the job started), and `-U` input rows
//! are passed over (an upsert needs no withdrawal).
//!
//! State: each key's current row, written whole at each checkpoint (a deleted key has
//! no row a later delta could replace it with). docs/engine.md, "Changelog streams".

use crate::aggregate::GroupKeys;
use crate::keyed_changelog::{without_kinds, KeyedChangelog};
use crate::window::{keyed_rows_state, state_columns, whole_rows, with_row_key};
use riffle_core::arrow::array::ArrayRef;
use riffle_core::arrow::row::{OwnedRow, RowConverter};
use riffle_core::{
    row_kind_array, row_kinds, Epoch, Error, Operator, OperatorContext, OperatorFactory,
    OperatorState, RecordBatch, Result, RowKind, StreamSchema,
};
use std::sync::Arc;

/// Plans the normalizer of an upsert stream.
pub struct UpsertNormalizeFactory {
    shape: KeyedChangelog,
    schema: StreamSchema,
}

impl UpsertNormalizeFactory {
    /// Normalizes `input` (rows with kinds) keyed by the columns `keys`.
    ///
    /// # Errors
    /// An input without row kinds, no key, or a key column it does not have.
    pub fn new(input: &StreamSchema, keys: &[&str]) -> Result<Self> {
        let refusals = (
            "the upsert normalizer reads rows with kinds (an upsert source's)",
            "an upsert stream needs a PRIMARY KEY",
        );
        Ok(Self {
            shape: KeyedChangelog::new(input, keys, refusals)?,
            schema: input.clone(),
        })
    }
}

impl OperatorFactory for UpsertNormalizeFactory {
    fn describe(&self) -> String {
        format!(
            "upserts to a changelog by ({}): -U/+U, -D",
            self.shape.key_names()
        )
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn is_stateful(&self) -> bool {
        true
    }
    fn key_columns(&self, _: usize) -> Option<Vec<usize>> {
        Some(self.shape.input_keys())
    }
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Operator>> {
        let shape = &self.shape;
        Ok(Box::new(UpsertNormalize {
            keys: shape.keys.clone(),
            table: GroupKeys::new(shape.key_schema.clone())?,
            converter: whole_rows(&shape.rows)?,
            current: Vec::new(),
            rows: shape.rows.clone(),
            kind_at: shape.kind_at,
            schema: self.schema.clone(),
            max_parallelism: ctx.max_parallelism,
            operator: ctx.operator_id.0.clone(),
        }))
    }
}

struct UpsertNormalize {
    keys: Vec<usize>,
    table: GroupKeys,
    converter: RowConverter,
    /// Per key id: its current row.
    current: Vec<Option<OwnedRow>>,
    rows: StreamSchema,
    kind_at: usize,
    schema: StreamSchema,
    max_parallelism: u16,
    operator: String,
}

/// What one input row does to its key's current row `now`: the rows to emit, and the
/// key's row after it.
pub(crate) fn normalize<T: Clone + PartialEq>(
    now: Option<&T>,
    kind: RowKind,
    row: &T,
) -> (Vec<(T, RowKind)>, Option<Option<T>>) {
    match (kind, now) {
        (RowKind::Insert | RowKind::UpdateAfter, Some(old)) if old == row => (Vec::new(), None),
        (RowKind::Insert | RowKind::UpdateAfter, Some(old)) => (
            vec![
                (old.clone(), RowKind::UpdateBefore),
                (row.clone(), RowKind::UpdateAfter),
            ],
            Some(Some(row.clone())),
        ),
        (RowKind::Insert | RowKind::UpdateAfter, None) => (
            vec![(row.clone(), RowKind::Insert)],
            Some(Some(row.clone())),
        ),
        (RowKind::Delete, Some(old)) => (vec![(old.clone(), RowKind::Delete)], Some(None)),
        (RowKind::Delete, None) | (RowKind::UpdateBefore, _) => (Vec::new(), None),
    }
}

impl UpsertNormalize {
    fn ids(&mut self, rows: &RecordBatch) -> Result<Vec<u32>> {
        let keys: Vec<ArrayRef> = self.keys.iter().map(|&i| rows.column(i).clone()).collect();
        let all: Vec<u32> = (0..rows.num_rows() as u32).collect();
        let mut ids = Vec::with_capacity(all.len());
        self.table.intern(&keys, &all, &mut ids)?;
        if self.current.len() < self.table.len() {
            self.current.resize(self.table.len(), None);
        }
        Ok(ids)
    }
}

impl Operator for UpsertNormalize {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        let kinds = row_kinds(&batch)?.ok_or_else(|| Error::State {
            operator: self.operator.clone(),
            message: "an upsert batch without row kinds".into(),
        })?;
        let rows = without_kinds(&batch, self.kind_at, &self.rows)?;
        let ids = self.ids(&rows)?;
        let converted = self.converter.convert_columns(rows.columns())?;
        let mut emitted: Vec<(OwnedRow, RowKind)> = Vec::new();
        for (r, (&id, &kind)) in ids.iter().zip(&kinds).enumerate() {
            let row = converted.row(r).owned();
            let slot = &mut self.current[id as usize];
            let (emit, after) = normalize(slot.as_ref(), kind, &row);
            emitted.extend(emit);
            if let Some(after) = after {
                *slot = after;
            }
        }
        if emitted.is_empty() {
            return Ok(());
        }
        let mut columns = self
            .converter
            .convert_rows(emitted.iter().map(|(row, _)| row.row()))?;
        columns.insert(
            self.kind_at,
            Arc::new(row_kind_array(emitted.iter().map(|(_, k)| *k))),
        );
        out.push(RecordBatch::try_new(self.schema.schema.clone(), columns)?);
        Ok(())
    }

    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        let rows = self.current.iter().flatten().map(OwnedRow::row);
        let columns = self.converter.convert_rows(rows)?;
        let batch = keyed_rows_state(
            &self.rows,
            columns,
            &self.keys,
            Vec::new(),
            self.max_parallelism,
        )?;
        let key_names: Vec<&str> = self
            .keys
            .iter()
            .map(|&i| self.rows.schema.field(i).name().as_str())
            .collect();
        Ok(OperatorState::of(vec![with_row_key(batch, &key_names)?]))
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        for batch in state.batches {
            let columns = state_columns(&batch, self.rows.schema.fields(), &self.operator)?;
            let rows = RecordBatch::try_new(self.rows.schema.clone(), columns)?;
            let ids = self.ids(&rows)?;
            let converted = self.converter.convert_columns(rows.columns())?;
            for (r, &id) in ids.iter().enumerate() {
                self.current[id as usize] = Some(converted.row(r).owned());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upsert_becomes_an_insert_or_an_update_and_a_delete_takes_the_old_row() {
        use RowKind::*;
        assert_eq!(
            normalize(None, UpdateAfter, &1),
            (vec![(1, Insert)], Some(Some(1)))
        );
        assert_eq!(
            normalize(Some(&1), UpdateAfter, &2),
            (vec![(1, UpdateBefore), (2, UpdateAfter)], Some(Some(2)))
        );
        assert_eq!(normalize(Some(&2), UpdateAfter, &2), (vec![], None));
        assert_eq!(
            normalize(Some(&2), Delete, &0),
            (vec![(2, Delete)], Some(None))
        );
        assert_eq!(normalize(None::<&i32>, Delete, &0), (vec![], None));
        assert_eq!(normalize(Some(&2), UpdateBefore, &0), (vec![], None));
    }
}
