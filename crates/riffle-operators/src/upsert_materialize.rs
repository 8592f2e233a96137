//! Puts a changelog back in order per key before a table that applies it by a key
//! (Flink's SinkUpsertMaterializer). A join of changelogs emits the withdrawal of a
//! row's old pairs from the subtask of its old join key and its new pairs from the
//! subtask of the new one; a table keyed by something else (an account's id, when the
//! join key is its region) could receive the new row before the old one's withdrawal,
//! and the withdrawal would then delete the new row. Keyed by the table's key, this
//! operator keeps the rows each key holds, in arrival order, and emits only changes of
//! the key's visible row — the newest one held: `+I` for a first row, `-U` old/`+U`
//! new for another, `-D` when the last row is withdrawn. A withdrawal takes back the
//! newest equal row (columns but `_timestamp`), whichever order it came in. A row whose
//! key holds a NULL has no key to order by and passes as it came.
//!
//! State: each key's rows in order, written whole at each checkpoint.
//! docs/engine.md, "Joins of changelogs".

use crate::aggregate::GroupKeys;
use crate::keyed_changelog::{without_kinds, KeyedChangelog};
use crate::window::{keyed_rows_state, state_columns};
use riffle_core::arrow::array::{Array, ArrayRef, AsArray};
use riffle_core::arrow::datatypes::{SchemaRef, TimestampNanosecondType};
use riffle_core::arrow::row::{RowConverter, SortField};
use riffle_core::{
    row_kind_array, row_kinds, Epoch, Error, Operator, OperatorContext, OperatorFactory,
    OperatorState, RecordBatch, Result, RowKind, StreamSchema,
};
use std::sync::Arc;

/// A row's columns but `_timestamp`, in Arrow's row format.
type RowBytes = Arc<[u8]>;

/// Plans the materializer before a keyed table.
pub struct UpsertMaterializeFactory {
    shape: KeyedChangelog,
    schema: StreamSchema,
}

impl UpsertMaterializeFactory {
    /// Orders `input` (a changelog) by the columns `keys` of the table it goes to.
    ///
    /// # Errors
    /// An input without row kinds, no key, or a key column it does not have.
    pub fn new(input: &StreamSchema, keys: &[&str]) -> Result<Self> {
        let refusals = (
            "the upsert materializer reads a changelog",
            "an upsert materializer needs the table's key",
        );
        Ok(Self {
            shape: KeyedChangelog::new(input, keys, refusals)?,
            schema: input.clone(),
        })
    }
}

impl OperatorFactory for UpsertMaterializeFactory {
    fn describe(&self) -> String {
        format!(
            "changelog in order per table key ({}): -U/+U, -D",
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
        let ts = shape.rows.timestamp_index;
        let converter = RowConverter::new(
            (shape.rows.schema.fields().iter().enumerate())
                .filter(|(i, _)| *i != ts)
                .map(|(_, f)| SortField::new(f.data_type().clone()))
                .collect(),
        )?;
        Ok(Box::new(UpsertMaterialize {
            keys: shape.keys.clone(),
            key_schema: shape.key_schema.clone(),
            table: GroupKeys::new(shape.key_schema.clone())?,
            converter,
            held: Vec::new(),
            rows: shape.rows.clone(),
            kind_at: shape.kind_at,
            schema: self.schema.clone(),
            max_parallelism: ctx.max_parallelism,
            operator: ctx.operator_id.0.clone(),
        }))
    }
}

/// One key's rows, oldest first, each with its event time.
type Held = Vec<(RowBytes, i64)>;

/// A change as emitted: the row, its event time, its kind.
type Emitted = (RowBytes, i64, RowKind);

/// What one change does to a key's rows `held`: the rows to emit; `None` for a
/// withdrawal of a row the key does not hold (changing nothing). Each input channel
/// brings a row's insertion before its withdrawal, so that never happens to a changelog.
fn apply(held: &mut Held, kind: RowKind, row: RowBytes, ts: i64) -> Option<Vec<Emitted>> {
    let before = held.last().cloned();
    if kind.is_retraction() {
        let at = held.iter().rposition(|(r, _)| *r == row)?;
        held.remove(at);
    } else {
        held.push((row, ts));
    }
    Some(match (before, held.last()) {
        (Some(old), Some(new)) if old.0 == new.0 => Vec::new(),
        (Some(old), Some(new)) => vec![
            (old.0, old.1, RowKind::UpdateBefore),
            (new.0.clone(), new.1, RowKind::UpdateAfter),
        ],
        (None, Some(new)) => vec![(new.0.clone(), new.1, RowKind::Insert)],
        (Some(old), None) => vec![(old.0, old.1, RowKind::Delete)],
        (None, None) => Vec::new(),
    })
}

struct UpsertMaterialize {
    keys: Vec<usize>,
    key_schema: SchemaRef,
    table: GroupKeys,
    /// The rows' columns but `_timestamp`.
    converter: RowConverter,
    /// Per key id: its rows.
    held: Vec<Held>,
    rows: StreamSchema,
    kind_at: usize,
    schema: StreamSchema,
    max_parallelism: u16,
    operator: String,
}

impl UpsertMaterialize {
    /// `rows` (of the schema without row kinds) without `_timestamp`, and the times.
    fn split(&self, rows: &RecordBatch) -> (Vec<ArrayRef>, Vec<i64>) {
        let ts_at = self.rows.timestamp_index;
        let mut columns = rows.columns().to_vec();
        let ts = columns.remove(ts_at);
        let ts = ts
            .as_primitive::<TimestampNanosecondType>()
            .values()
            .to_vec();
        (columns, ts)
    }

    /// Whether each row's key holds a NULL.
    fn null_keys(&self, rows: &RecordBatch) -> Vec<bool> {
        (0..rows.num_rows())
            .map(|r| self.keys.iter().any(|&k| rows.column(k).is_null(r)))
            .collect()
    }

    fn ids(&mut self, rows: &RecordBatch) -> Result<Vec<u32>> {
        let keys: Vec<ArrayRef> = self.keys.iter().map(|&i| rows.column(i).clone()).collect();
        let all: Vec<u32> = (0..rows.num_rows() as u32).collect();
        let mut ids = Vec::with_capacity(all.len());
        self.table.intern(&keys, &all, &mut ids)?;
        if self.held.len() < self.table.len() {
            self.held.resize_with(self.table.len(), Vec::new);
        }
        Ok(ids)
    }

    /// Rows as the input schema's columns, with `kinds` when given.
    fn columns(
        &self,
        rows: &[(RowBytes, i64)],
        kinds: Option<Vec<RowKind>>,
    ) -> Result<Vec<ArrayRef>> {
        let parser = self.converter.parser();
        let mut columns =
            (self.converter).convert_rows(rows.iter().map(|(r, _)| parser.parse(r)))?;
        let ts = rows.iter().map(|(_, t)| *t).collect();
        columns.insert(
            self.rows.timestamp_index,
            crate::window::timestamp_array(ts),
        );
        if let Some(kinds) = kinds {
            columns.insert(self.kind_at, Arc::new(row_kind_array(kinds)));
        }
        Ok(columns)
    }
}

impl Operator for UpsertMaterialize {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        let kinds = row_kinds(&batch)?.ok_or_else(|| Error::State {
            operator: self.operator.clone(),
            message: "a changelog batch without row kinds".into(),
        })?;
        let rows = without_kinds(&batch, self.kind_at, &self.rows)?;
        let ids = self.ids(&rows)?;
        let (data, ts) = self.split(&rows);
        let converted = self.converter.convert_columns(&data)?;
        let keyless = self.null_keys(&rows);
        let mut emitted = Vec::new();
        for (r, (&id, &kind)) in ids.iter().zip(&kinds).enumerate() {
            let row: RowBytes = Arc::from(converted.row(r).as_ref());
            if keyless[r] {
                // No table key to order by: passed on as it came (PostgreSQL refuses
                // it; a file holds it).
                emitted.push((row, ts[r], kind));
                continue;
            }
            let changes = apply(&mut self.held[id as usize], kind, row, ts[r]);
            emitted.extend(changes.ok_or_else(|| {
                Error::plan(format!(
                    "`{}`: a withdrawn row was never added under its key: the input is not a changelog of the rows it added",
                    self.operator
                ))
            })?);
        }
        if emitted.is_empty() {
            return Ok(());
        }
        let kinds = emitted.iter().map(|e| e.2).collect();
        let rows: Vec<(RowBytes, i64)> = emitted.into_iter().map(|(r, t, _)| (r, t)).collect();
        let columns = self.columns(&rows, Some(kinds))?;
        out.push(RecordBatch::try_new(self.schema.schema.clone(), columns)?);
        Ok(())
    }

    /// Keys whose rows were all withdrawn keep their ids until a snapshot: when they
    /// are most of the ids, the state is rebuilt from the snapshot (memory follows the
    /// table, not every key it ever held).
    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        let state = self.state()?;
        let empty = self.held.iter().filter(|h| h.is_empty()).count();
        if crate::aggregate::worth_rebuilding(empty, self.held.len()) {
            self.table = GroupKeys::new(self.key_schema.clone())?;
            self.held = Vec::new();
            self.restore(state.clone())?;
        }
        Ok(state)
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        self.restore_state(state)
    }
}

impl UpsertMaterialize {
    fn state(&self) -> Result<OperatorState> {
        let rows: Vec<(RowBytes, i64)> = self.held.iter().flatten().cloned().collect();
        if rows.is_empty() {
            return Ok(OperatorState::default());
        }
        let columns = self.columns(&rows, None)?;
        let batch = keyed_rows_state(
            &self.rows,
            columns,
            &self.keys,
            Vec::new(),
            self.max_parallelism,
        )?;
        Ok(OperatorState::of(vec![batch]))
    }

    fn restore_state(&mut self, state: OperatorState) -> Result<()> {
        for batch in state.batches {
            let columns = state_columns(&batch, self.rows.schema.fields(), &self.operator)?;
            let rows = RecordBatch::try_new(self.rows.schema.clone(), columns)?;
            let ids = self.ids(&rows)?;
            let (data, ts) = self.split(&rows);
            let converted = self.converter.convert_columns(&data)?;
            for (r, &id) in ids.iter().enumerate() {
                let row: RowBytes = Arc::from(converted.row(r).as_ref());
                self.held[id as usize].push((row, ts[r]));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RowKind::*;

    fn row(text: &str) -> RowBytes {
        Arc::from(text.as_bytes())
    }

    fn shown(emits: Option<Vec<Emitted>>) -> Vec<(String, &'static str)> {
        (emits.expect("held").into_iter())
            .map(|(r, _, k)| (String::from_utf8_lossy(&r).into_owned(), k.short()))
            .collect()
    }

    fn s(r: &str, k: &'static str) -> (String, &'static str) {
        (r.to_string(), k)
    }

    #[test]
    fn a_new_row_arriving_before_the_old_ones_withdrawal_survives_it() {
        let mut held = Held::new();
        assert_eq!(
            shown(apply(&mut held, Insert, row("old"), 1)),
            [s("old", "+I")]
        );
        // Out of order: the new pair from another join subtask, then the old one's -D.
        assert_eq!(
            shown(apply(&mut held, Insert, row("new"), 2)),
            [s("old", "-U"), s("new", "+U")]
        );
        assert_eq!(shown(apply(&mut held, Delete, row("old"), 1)), []);
        assert_eq!(held, vec![(row("new"), 2)]);
    }

    #[test]
    fn in_order_changes_pass_as_they_are() {
        let mut held = Held::new();
        apply(&mut held, Insert, row("a"), 1);
        assert_eq!(
            shown(apply(&mut held, UpdateBefore, row("a"), 1)),
            [s("a", "-D")]
        );
        assert_eq!(
            shown(apply(&mut held, UpdateAfter, row("b"), 2)),
            [s("b", "+I")]
        );
    }

    #[test]
    fn withdrawing_the_visible_row_shows_the_newest_held_before_it() {
        let mut held = Held::new();
        apply(&mut held, Insert, row("a"), 1);
        apply(&mut held, Insert, row("b"), 2);
        assert_eq!(
            shown(apply(&mut held, Delete, row("b"), 2)),
            [s("b", "-U"), s("a", "+U")]
        );
        assert_eq!(apply(&mut held, Delete, row("zzz"), 9), None, "not held");
        assert_eq!(shown(apply(&mut held, Delete, row("a"), 1)), [s("a", "-D")]);
        assert!(held.is_empty());
    }

    #[test]
    fn after_most_keys_left_a_snapshot_keeps_what_is_held_in_order() {
        use riffle_core::arrow::array::{Int64Array, TimestampNanosecondArray};
        use riffle_core::arrow::datatypes::{DataType, Field};
        let schema = StreamSchema::with_timestamp(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("v", DataType::Int64, false),
            riffle_core::row_kind_field(),
        ]);
        let batch = |rows: &[(RowKind, i64, i64)]| {
            RecordBatch::try_new(
                schema.schema.clone(),
                vec![
                    Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
                    Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
                    Arc::new(row_kind_array(rows.iter().map(|r| r.0))),
                    Arc::new(
                        TimestampNanosecondArray::from(vec![0; rows.len()]).with_timezone("UTC"),
                    ),
                ],
            )
            .unwrap()
        };
        let f = UpsertMaterializeFactory::new(&schema, &["id"]).unwrap();
        let mut op = f.create(&OperatorContext::detached("m", 0, 1)).unwrap();
        let mut out = Vec::new();
        let added: Vec<_> = (0..3000).map(|k| (Insert, k, 1)).collect();
        let gone: Vec<_> = (0..2999).map(|k| (Delete, k, 1)).collect();
        op.on_batch(0, batch(&added), &mut out).unwrap();
        op.on_batch(0, batch(&[(Insert, 2999, 2)]), &mut out)
            .unwrap();
        op.on_batch(0, batch(&gone), &mut out).unwrap();
        assert_eq!(op.snapshot(Epoch(1)).unwrap().rows(), 2);
        // Key 2999 holds v = 1, then v = 2 (visible): withdrawing 2 shows 1 again.
        out.clear();
        op.on_batch(0, batch(&[(Delete, 2999, 2)]), &mut out)
            .unwrap();
        let kinds = row_kinds(&out[0]).unwrap().unwrap();
        let v = out[0]
            .column(1)
            .as_primitive::<riffle_core::arrow::datatypes::Int64Type>();
        assert_eq!(kinds, [UpdateBefore, UpdateAfter]);
        assert_eq!(v.values().to_vec(), [2, 1]);
    }
}
