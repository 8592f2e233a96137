//! A checkpoint's or savepoint's state as tables, one per operator (and per kind of
//! state row), for `riffle state query`.
//!
//! Files are read in manifest order and checked like a restore checks them. Where an
//! operator writes deltas (its state schema names the columns that identify a row in
//! the metadata key [`ROW_KEY_METADATA`]), only the last row per key is kept: the table
//! shows the state a restore would see.

use crate::error::{StateError, StateResult};
use crate::manifest::Manifest;
use crate::store::CheckpointStore;
use riffle_core::arrow::array::{ArrayRef, UInt32Array};
use riffle_core::arrow::compute::{concat_batches, take_record_batch};
use riffle_core::arrow::datatypes::{Schema, SchemaRef};
use riffle_core::arrow::row::{RowConverter, SortField};
use riffle_core::state::INTERNAL_METADATA;
use riffle_core::RecordBatch;
use std::collections::HashSet;
use std::sync::Arc;

pub use riffle_core::state::ROW_KEY_METADATA;

/// One operator's state rows of one schema.
#[derive(Debug, Clone)]
pub struct StateTable {
    /// `{operator}`, or `{operator}_{column}` when the operator keeps rows of several
    /// schemas (the column that tells them apart: `left`, `right`, `right_keys`).
    pub name: String,
    /// The operator's id.
    pub operator: String,
    /// The rows (metadata stripped), current rows only.
    pub batch: RecordBatch,
    /// Rows in the files before superseded rows were dropped.
    pub stored_rows: usize,
}

/// Loads every operator's state of `manifest` as tables.
///
/// # Errors
/// A damaged or missing file, named; batches that do not concatenate.
pub async fn load_state_tables(
    store: &CheckpointStore,
    manifest: &Manifest,
) -> StateResult<Vec<StateTable>> {
    let mut tables = Vec::new();
    for op in &manifest.operators {
        // Groups by field list (metadata aside), in first-seen order.
        let mut groups: Vec<(SchemaRef, Vec<RecordBatch>, Option<String>)> = Vec::new();
        for sub in &op.subtasks {
            for file in &sub.files {
                for batch in store.read_state(file).await? {
                    if batch.schema().metadata().contains_key(INTERNAL_METADATA) {
                        continue;
                    }
                    let row_key = batch.schema().metadata().get(ROW_KEY_METADATA).cloned();
                    let plain = Arc::new(Schema::new(batch.schema().fields().clone()));
                    let batch =
                        batch
                            .with_schema(plain.clone())
                            .map_err(|e| StateError::Corrupt {
                                path: file.path.clone(),
                                reason: e.to_string(),
                            })?;
                    match groups.iter_mut().find(|(s, _, _)| *s == plain) {
                        Some((_, batches, key)) => {
                            batches.push(batch);
                            if key.is_none() {
                                *key = row_key;
                            }
                        }
                        None => groups.push((plain, vec![batch], row_key)),
                    }
                }
            }
        }
        let several = groups.len() > 1;
        for (schema, batches, row_key) in groups {
            let name = match schema.fields().last() {
                Some(last) if several => format!("{}_{}", op.operator, last.name()),
                _ => op.operator.clone(),
            };
            let bad = |reason: String| StateError::Corrupt {
                path: format!("state of `{}`", op.operator),
                reason,
            };
            let all = concat_batches(&schema, &batches).map_err(|e| bad(e.to_string()))?;
            let stored_rows = all.num_rows();
            let batch = match row_key {
                Some(key) => last_per_key(&all, &key).map_err(bad)?,
                None => all,
            };
            tables.push(StateTable {
                name,
                operator: op.operator.clone(),
                batch,
                stored_rows,
            });
        }
    }
    Ok(tables)
}

/// The rows of `batch` that no later row with the same `key` columns replaces, in order.
fn last_per_key(batch: &RecordBatch, key: &str) -> Result<RecordBatch, String> {
    let columns: Vec<ArrayRef> = key
        .split(',')
        .map(|name| {
            batch
                .column_by_name(name)
                .cloned()
                .ok_or_else(|| format!("row key column `{name}` is missing"))
        })
        .collect::<Result<_, _>>()?;
    let fields = columns
        .iter()
        .map(|c| SortField::new(c.data_type().clone()))
        .collect();
    let converter = RowConverter::new(fields).map_err(|e| e.to_string())?;
    let rows = converter
        .convert_columns(&columns)
        .map_err(|e| e.to_string())?;
    let mut seen = HashSet::new();
    let mut keep: Vec<u32> = (0..batch.num_rows())
        .rev()
        .filter(|&i| seen.insert(rows.row(i)))
        .map(|i| i as u32)
        .collect();
    keep.reverse();
    take_record_batch(batch, &UInt32Array::from(keep)).map_err(|e| e.to_string())
}
