//! A changelog join's state: per side one batch of the rows it holds — the key group,
//! the row (its `data` columns and `_timestamp`, as a struct column named after the
//! side) and how many times it is held. Written whole at every checkpoint: rows leave
//! as well as arrive, so earlier files cannot be kept (docs/state-format.md, "State
//! files").

use super::pairs::Held;
use super::{ChangelogJoin, SIDE_NAMES};
use riffle_core::arrow::array::{ArrayRef, AsArray, Int64Array, StructArray};
use riffle_core::arrow::datatypes::TimestampNanosecondType;
use riffle_core::arrow::datatypes::{DataType, Field, Fields, Int64Type, Schema};
use riffle_core::state::KEY_GROUP_FIELD;
use riffle_core::{Error, OperatorState, RecordBatch, Result, TIMESTAMP_FIELD};
use std::sync::Arc;

/// The state column of how many times a row is held.
const COUNT_FIELD: &str = "count";

impl ChangelogJoin {
    /// The fields of a held row of `side`: its `data` columns, then `_timestamp`.
    fn row_fields(&self, side: usize) -> Fields {
        let schema = &self.sides[side].schema;
        let mut fields: Vec<Field> = self.data[side]
            .iter()
            .map(|&i| schema.field(i).clone())
            .collect();
        fields.push(schema.field(self.sides[side].timestamp_index).clone());
        fields.into()
    }

    /// `side`'s held rows as one state batch, or `None` when it holds none.
    fn side_state(&self, side: usize) -> Result<Option<RecordBatch>> {
        let held: Vec<_> = (self.keyed.iter().chain([&self.null_keyed[side]]))
            .flat_map(|k| k.sides[side].iter())
            .collect();
        if held.is_empty() {
            return Ok(None);
        }
        let parser = self.converters[side].parser();
        let mut data =
            self.converters[side].convert_rows(held.iter().map(|(r, _)| parser.parse(r)))?;
        let keys = self.key_columns(side, &data)?;
        let (_, groups) = crate::window::key_group_column(&keys, held.len(), self.max_parallelism)?;
        data.push(crate::window::timestamp_array(
            held.iter().map(|(_, h)| h.ts).collect(),
        ));
        let counts = Int64Array::from_iter_values(held.iter().map(|(_, h)| h.count as i64));
        let fields = self.row_fields(side);
        let schema = Schema::new(vec![
            Field::new(KEY_GROUP_FIELD, DataType::UInt16, false),
            Field::new(SIDE_NAMES[side], DataType::Struct(fields.clone()), false),
            Field::new(COUNT_FIELD, DataType::Int64, false),
        ]);
        let rows: ArrayRef = Arc::new(StructArray::try_new(fields, data, None)?);
        Ok(Some(RecordBatch::try_new(
            Arc::new(schema),
            vec![groups, rows, Arc::new(counts)],
        )?))
    }

    /// The state at a barrier (see [`Operator::snapshot`](riffle_core::Operator)).
    /// Keys whose rows were all withdrawn keep their ids until then: when they are
    /// most of the ids, the state is rebuilt from its own snapshot, so a CDC table whose
    /// keys come and go (orders created and deleted) does not grow memory for ever.
    pub(super) fn snapshot_state(&mut self) -> Result<OperatorState> {
        let batches = (0..2)
            .map(|side| self.side_state(side))
            .collect::<Result<Vec<_>>>()?;
        let state = OperatorState::of(batches.into_iter().flatten().collect());
        let empty = self.keyed.iter().filter(|k| k.is_empty()).count();
        if crate::aggregate::worth_rebuilding(empty, self.keyed.len()) {
            self.table = crate::aggregate::GroupKeys::for_matchable(&self.key_schema)?;
            self.keyed = Vec::new();
            self.null_keyed = Default::default();
            self.restore_state(state.clone())?;
        }
        Ok(state)
    }

    /// Holds again the rows a snapshot wrote (only this subtask's key groups).
    pub(super) fn restore_state(&mut self, state: OperatorState) -> Result<()> {
        let operator = self.operator.clone();
        let damaged = |message: String| Error::State {
            operator: operator.clone(),
            message,
        };
        for batch in state.batches {
            let side = SIDE_NAMES
                .iter()
                .position(|n| batch.column_by_name(n).is_some())
                .ok_or_else(|| damaged("a state batch has neither `left` nor `right`".into()))?;
            let rows = batch
                .column_by_name(SIDE_NAMES[side])
                .and_then(|c| c.as_struct_opt())
                .ok_or_else(|| damaged(format!("`{}` is not a struct", SIDE_NAMES[side])))?;
            let counts = batch
                .column_by_name(COUNT_FIELD)
                .and_then(|c| c.as_primitive_opt::<Int64Type>())
                .ok_or_else(|| damaged(format!("no Int64 column `{COUNT_FIELD}`")))?;
            let expected = self.row_fields(side);
            if rows.fields() != &expected {
                return Err(damaged(format!(
                    "the {} rows have columns {:?}, the join reads {:?}",
                    SIDE_NAMES[side],
                    rows.fields().iter().map(|f| f.name()).collect::<Vec<_>>(),
                    expected.iter().map(|f| f.name()).collect::<Vec<_>>()
                )));
            }
            let (data, ts) = rows.columns().split_at(expected.len() - 1);
            let ts = ts[0]
                .as_primitive_opt::<TimestampNanosecondType>()
                .ok_or_else(|| damaged(format!("`{TIMESTAMP_FIELD}` is not a timestamp")))?;
            let encoded = self.converters[side].convert_columns(data)?;
            let ids = self.key_ids(side, data)?;
            for (r, id) in ids.into_iter().enumerate() {
                let Ok(count) = u64::try_from(counts.value(r)) else {
                    return Err(damaged(format!(
                        "row {r} of the {} rows has a negative count",
                        SIDE_NAMES[side]
                    )));
                };
                let held = Held {
                    count,
                    ts: ts.value(r),
                };
                let key = match id {
                    Some(id) => &mut self.keyed[id],
                    None => &mut self.null_keyed[side],
                };
                key.sides[side].hold(Arc::from(encoded.row(r).as_ref()), held);
            }
        }
        Ok(())
    }
}
