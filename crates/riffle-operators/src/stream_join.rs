//! An unbounded inner equi-join: every row is kept, and each arrival emits its matches
//! among the rows already seen on the other side (Nexmark q3). State grows with the
//! input; use it only where the key space is bounded or the plan accepts that.
//! Output: chosen left columns, chosen right columns, `_timestamp` = the later of the
//! two rows' event times.

use crate::aggregate::GroupKeys;
use riffle_core::arrow::array::{Array, ArrayRef, AsArray, StructArray, UInt16Array};
use riffle_core::arrow::compute::{cast, interleave};
use riffle_core::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimestampNanosecondType};
use riffle_core::state::KEY_GROUP_FIELD;
use riffle_core::{
    Epoch, Error, Operator, OperatorContext, OperatorFactory, OperatorState, RecordBatch, Result,
    StreamSchema,
};
use std::sync::Arc;

/// Plans an unbounded stream-stream inner join.
pub struct StreamJoinFactory {
    sides: [StreamSchema; 2],
    keys: [Vec<usize>; 2],
    outputs: [Vec<usize>; 2],
    key_schema: SchemaRef,
    schema: StreamSchema,
}

impl StreamJoinFactory {
    /// Joins `left` and `right` where `left_keys` equal `right_keys`.
    ///
    /// # Errors
    /// Unknown columns, unequal key lists, or clashing output names.
    pub fn new(
        left: &StreamSchema,
        right: &StreamSchema,
        left_keys: &[&str],
        right_keys: &[&str],
        left_columns: &[&str],
        right_columns: &[&str],
    ) -> Result<Self> {
        if left_keys.len() != right_keys.len() || left_keys.is_empty() {
            return Err(Error::plan(
                "a join needs the same positive number of keys on both sides",
            ));
        }
        let idx = |s: &StreamSchema, names: &[&str]| {
            names
                .iter()
                .map(|n| s.index_of(n))
                .collect::<Result<Vec<_>>>()
        };
        let keys = [idx(left, left_keys)?, idx(right, right_keys)?];
        let outputs = [idx(left, left_columns)?, idx(right, right_columns)?];
        let mut fields: Vec<Field> = outputs[0]
            .iter()
            .map(|&i| left.schema.field(i).clone())
            .collect();
        fields.extend(outputs[1].iter().map(|&i| right.schema.field(i).clone()));
        for (i, f) in fields.iter().enumerate() {
            if fields[..i].iter().any(|g| g.name() == f.name()) {
                return Err(Error::plan(format!(
                    "join output has two columns named `{}`; rename one side first",
                    f.name()
                )));
            }
        }
        let key_schema = Arc::new(Schema::new(
            keys[0]
                .iter()
                .map(|&i| left.schema.field(i).clone().with_nullable(true))
                .collect::<Vec<_>>(),
        ));
        Ok(Self {
            sides: [left.clone(), right.clone()],
            keys,
            outputs,
            key_schema,
            schema: StreamSchema::with_timestamp(fields),
        })
    }
}

impl OperatorFactory for StreamJoinFactory {
    fn describe(&self) -> String {
        let names = |s: &StreamSchema, k: &[usize]| {
            k.iter()
                .map(|&i| s.schema.field(i).name().clone())
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "unbounded join on ({}) = ({})",
            names(&self.sides[0], &self.keys[0]),
            names(&self.sides[1], &self.keys[1])
        )
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn input_count(&self) -> usize {
        2
    }
    fn is_stateful(&self) -> bool {
        true
    }
    fn key_columns(&self, input: usize) -> Option<Vec<usize>> {
        Some(self.keys[input.min(1)].clone())
    }
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(StreamJoin {
            sides: self.sides.clone(),
            keys: self.keys.clone(),
            outputs: self.outputs.clone(),
            schema: self.schema.clone(),
            table: GroupKeys::new(self.key_schema.clone())?,
            key_schema: self.key_schema.clone(),
            stored: [Vec::new(), Vec::new()],
            rows_by_key: [Vec::new(), Vec::new()],
            max_parallelism: ctx.max_parallelism,
            operator: ctx.operator_id.0.clone(),
        }))
    }
}

struct StreamJoin {
    sides: [StreamSchema; 2],
    keys: [Vec<usize>; 2],
    outputs: [Vec<usize>; 2],
    schema: StreamSchema,
    table: GroupKeys,
    key_schema: SchemaRef,
    /// Every batch seen, per side.
    stored: [Vec<RecordBatch>; 2],
    /// Per side, per key id: (batch, row) of each stored row.
    rows_by_key: [Vec<Vec<(u32, u32)>>; 2],
    max_parallelism: u16,
    operator: String,
}

impl StreamJoin {
    fn key_columns(&self, side: usize, batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
        self.keys[side]
            .iter()
            .zip(self.key_schema.fields())
            .map(|(&i, f)| Ok(cast(batch.column(i), f.data_type())?))
            .collect()
    }

    fn gather(&self, side: usize, column: usize, rows: &[(usize, usize)]) -> Result<ArrayRef> {
        let arrays: Vec<&dyn Array> = self.stored[side]
            .iter()
            .map(|b| b.column(column).as_ref())
            .collect();
        Ok(interleave(&arrays, rows)?)
    }

    fn add(&mut self, side: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        let rows: Vec<u32> = (0..batch.num_rows() as u32).collect();
        let mut ids = Vec::new();
        self.table
            .intern(&self.key_columns(side, &batch)?, &rows, &mut ids)?;
        let other = 1 - side;
        for list in &mut self.rows_by_key {
            list.resize_with(self.table.len(), Vec::new);
        }
        let batch_index = self.stored[side].len() as u32;
        self.stored[side].push(batch);
        // Pairs (this row, other row) as (batch, row) references.
        let mut mine: Vec<(usize, usize)> = Vec::new();
        let mut theirs: Vec<(usize, usize)> = Vec::new();
        for (row, &id) in ids.iter().enumerate() {
            for &(b, r) in &self.rows_by_key[other][id as usize] {
                mine.push((batch_index as usize, row));
                theirs.push((b as usize, r as usize));
            }
            self.rows_by_key[side][id as usize].push((batch_index, row as u32));
        }
        if mine.is_empty() {
            return Ok(());
        }
        let (left_rows, right_rows) = if side == 0 {
            (&mine, &theirs)
        } else {
            (&theirs, &mine)
        };
        let mut columns = Vec::new();
        for &c in &self.outputs[0] {
            columns.push(self.gather(0, c, left_rows)?);
        }
        for &c in &self.outputs[1] {
            columns.push(self.gather(1, c, right_rows)?);
        }
        let lt = self.gather(0, self.sides[0].timestamp_index, left_rows)?;
        let rt = self.gather(1, self.sides[1].timestamp_index, right_rows)?;
        let (lt, rt) = (
            lt.as_primitive::<TimestampNanosecondType>(),
            rt.as_primitive::<TimestampNanosecondType>(),
        );
        let ts: Vec<i64> = lt
            .values()
            .iter()
            .zip(rt.values())
            .map(|(a, b)| *a.max(b))
            .collect();
        columns.push(crate::window::timestamp_array(ts));
        out.push(RecordBatch::try_new(self.schema.schema.clone(), columns)?);
        Ok(())
    }
}

impl Operator for StreamJoin {
    fn on_batch(
        &mut self,
        input: usize,
        batch: RecordBatch,
        out: &mut Vec<RecordBatch>,
    ) -> Result<()> {
        if batch.num_rows() > 0 {
            self.add(input.min(1), batch, out)?;
        }
        Ok(())
    }

    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        let mut batches = Vec::new();
        for side in 0..2 {
            let name = if side == 0 { "left" } else { "right" };
            let row_fields = self.sides[side].schema.fields().clone();
            let schema = Arc::new(Schema::new(vec![
                Field::new(KEY_GROUP_FIELD, DataType::UInt16, false),
                Field::new(name, DataType::Struct(row_fields.clone()), false),
            ]));
            for rows in &self.stored[side] {
                let keys = self.key_columns(side, rows)?;
                let (_, kg) =
                    crate::window::key_group_column(&keys, rows.num_rows(), self.max_parallelism)?;
                let kg: UInt16Array = kg
                    .as_primitive::<riffle_core::arrow::datatypes::UInt16Type>()
                    .clone();
                let columns: Vec<ArrayRef> = vec![
                    Arc::new(kg),
                    Arc::new(StructArray::new(
                        row_fields.clone(),
                        rows.columns().to_vec(),
                        None,
                    )),
                ];
                batches.push(RecordBatch::try_new(schema.clone(), columns)?);
            }
        }
        Ok(OperatorState { batches })
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
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
            self.add(side, rows, &mut ignored)?;
        }
        Ok(())
    }
}
