//! A checkpoint's or savepoint's state as tables, one per operator (and per kind of
//! state row), for `riffle state query`.
//!
//! Files are read in manifest order and checked like a restore checks them. Where an
//! operator writes deltas (its state schema names the columns that identify a row in
//! the metadata key [`ROW_KEY_METADATA`]), only the last row per key is kept, except that
//! its list columns (count DISTINCT's values, of which a delta holds only what a group
//! gained) are the concatenation of the key's lists: the table shows the state a
//! restore would see.

use crate::error::{StateError, StateResult};
use crate::manifest::Manifest;
use crate::store::CheckpointStore;
use riffle_core::arrow::array::{Array, ArrayRef, AsArray, ListArray, UInt32Array};
use riffle_core::arrow::buffer::OffsetBuffer;
use riffle_core::arrow::compute::{concat, concat_batches, take_record_batch};
use riffle_core::arrow::datatypes::{DataType, Schema, SchemaRef};
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
                    // Rebuilt, not `with_schema`: that refuses a schema with less metadata.
                    let batch = RecordBatch::try_new(plain.clone(), batch.columns().to_vec())
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
    let kept =
        take_record_batch(batch, &UInt32Array::from(keep.clone())).map_err(|e| e.to_string())?;
    if !batch
        .columns()
        .iter()
        .any(|c| matches!(c.data_type(), DataType::List(_)))
    {
        return Ok(kept);
    }
    // Every row of each kept key, in order, for the lists.
    let position: std::collections::HashMap<_, usize> = keep
        .iter()
        .enumerate()
        .map(|(k, &i)| (rows.row(i as usize), k))
        .collect();
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); keep.len()];
    for i in 0..batch.num_rows() {
        if let Some(&k) = position.get(&rows.row(i)) {
            members[k].push(i);
        }
    }
    let columns = batch
        .columns()
        .iter()
        .zip(kept.columns())
        .map(|(all, kept)| match all.as_list_opt::<i32>() {
            Some(lists) => concatenated_lists(lists, &members),
            None => Ok(kept.clone()),
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(kept.schema(), columns).map_err(|e| e.to_string())
}

/// Per entry of `members`, one list: the values of those rows' lists, in order.
fn concatenated_lists(lists: &ListArray, members: &[Vec<usize>]) -> Result<ArrayRef, String> {
    let mut parts: Vec<ArrayRef> = Vec::new();
    let mut lengths = Vec::with_capacity(members.len());
    for rows in members {
        let before = parts.len();
        parts.extend(rows.iter().map(|&i| lists.value(i)));
        lengths.push(parts[before..].iter().map(|p| p.len()).sum::<usize>());
    }
    let values = if parts.is_empty() {
        lists.values().slice(0, 0)
    } else {
        let refs: Vec<&dyn Array> = parts.iter().map(|p| p.as_ref()).collect();
        concat(&refs).map_err(|e| e.to_string())?
    };
    let DataType::List(field) = lists.data_type() else {
        return Err("not a list".into());
    };
    let list = ListArray::try_new(
        field.clone(),
        OffsetBuffer::from_lengths(lengths),
        values,
        None,
    )
    .map_err(|e| e.to_string())?;
    Ok(Arc::new(list))
}

#[cfg(test)]
mod tests {
    use super::last_per_key;
    use riffle_core::arrow::array::{Array, ArrayRef, AsArray, Int64Array, ListArray, StringArray};
    use riffle_core::arrow::datatypes::{DataType, Field, Int64Type, Schema};
    use riffle_core::RecordBatch;
    use std::sync::Arc;

    #[test]
    fn the_last_row_per_key_holds_every_list_value_of_the_key() {
        let lists = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
            Some(vec![Some(1), Some(2)]),
            Some(vec![Some(5)]),
            Some(vec![Some(3)]),
        ]);
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, false),
            Field::new("n__count", DataType::Int64, false),
            Field::new("d__value", lists.data_type().clone(), false),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec!["a", "b", "a"])),
            Arc::new(Int64Array::from(vec![2, 1, 3])),
            Arc::new(lists),
        ];
        let batch = RecordBatch::try_new(schema, columns).unwrap();
        let got = last_per_key(&batch, "k").unwrap();
        let keys = got.column(0).as_string::<i32>();
        assert_eq!(keys.iter().flatten().collect::<Vec<_>>(), ["b", "a"]);
        let counts = got.column(1).as_primitive::<Int64Type>();
        assert_eq!(counts.values().to_vec(), [1, 3], "the last row's count");
        let lists = got.column(2).as_list::<i32>();
        let values = |i: usize| lists.value(i).as_primitive::<Int64Type>().values().to_vec();
        assert_eq!(values(0), [5]);
        assert_eq!(values(1), [1, 2, 3], "a's lists concatenated in order");
        assert_eq!(lists.len(), 2);
    }
}
