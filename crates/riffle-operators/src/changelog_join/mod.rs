//! An unbounded equi-join whose inputs may be changelogs (`+I`/`-U`/`+U`/`-D`): CDC
//! tables, unwindowed aggregates, Top-N, other outer joins. Each key holds each side's
//! rows as a multiset; a row added joins what the other side holds, a row withdrawn
//! withdraws every pair it made, and an outer side's rows are padded while their key has
//! no partner (`pairs.rs`). The output is a changelog of `+I` and `-D` rows: left
//! columns, right columns, `_row_kind`, and `_timestamp` = the later of the two rows'
//! event times (docs/engine.md, "Joins of changelogs").
//!
//! Append-only inputs are joined by [`StreamJoinFactory`](crate::StreamJoinFactory),
//! whose state never shrinks and is checkpointed incrementally; this operator's state
//! is written whole at each checkpoint, one batch per side.

mod pairs;
mod state;

use crate::aggregate::GroupKeys;
use pairs::{Emit, KeyRows, Outer};
use riffle_core::arrow::array::{new_null_array, ArrayRef, AsArray, UInt32Array};
use riffle_core::arrow::compute::{cast, take};
use riffle_core::arrow::datatypes::{Field, Schema, SchemaRef, TimestampNanosecondType};
use riffle_core::arrow::row::{RowConverter, SortField};
use riffle_core::{
    row_kind_array, row_kind_field, row_kinds, Epoch, Error, Operator, OperatorContext,
    OperatorFactory, OperatorState, RecordBatch, Result, RowKind, StreamSchema,
};
use std::sync::Arc;

/// The sides' names, in state and in errors.
const SIDE_NAMES: [&str; 2] = ["left", "right"];

/// Plans a join of two streams, either of which may be a changelog.
pub struct ChangelogJoinFactory {
    sides: [StreamSchema; 2],
    /// Per side, the input columns that identify a row: all but `_timestamp` and
    /// `_row_kind`. A withdrawal takes back a row equal in these.
    data: [Vec<usize>; 2],
    /// Per side, the join keys, as positions in `data`.
    keys: [Vec<usize>; 2],
    /// Per side, the input columns of the keys (the keyed exchange's).
    key_inputs: [Vec<usize>; 2],
    /// Per side, the output columns, as positions in `data`.
    outputs: [Vec<usize>; 2],
    outer: Outer,
    key_schema: SchemaRef,
    schema: StreamSchema,
}

impl ChangelogJoinFactory {
    /// A join of `left` and `right` on `left_keys = right_keys` emitting the named
    /// columns of each side; `outer` marks the sides whose unmatched rows are emitted
    /// padded (`(true, false)` is a LEFT join).
    ///
    /// # Errors
    /// Unknown columns, no keys or unequal numbers of keys, two output columns with one
    /// name, a key type Arrow's row format cannot encode.
    pub fn new(
        left: &StreamSchema,
        right: &StreamSchema,
        (left_keys, right_keys): (&[&str], &[&str]),
        (left_columns, right_columns): (&[&str], &[&str]),
        outer: (bool, bool),
    ) -> Result<Self> {
        if left_keys.len() != right_keys.len() || left_keys.is_empty() {
            return Err(Error::plan(
                "a join needs the same positive number of keys on both sides",
            ));
        }
        let sides = [left.clone(), right.clone()];
        let data: [Vec<usize>; 2] = [data_columns(left), data_columns(right)];
        let position = |side: usize, name: &str| -> Result<(usize, usize)> {
            let i = sides[side].index_of(name)?;
            let at = data[side]
                .iter()
                .position(|&d| d == i)
                .ok_or_else(|| Error::plan(format!("`{name}` is not a column a join can read")))?;
            Ok((i, at))
        };
        let positions = |side: usize, names: &[&str]| -> Result<Vec<(usize, usize)>> {
            names.iter().map(|n| position(side, n)).collect()
        };
        let (lk, rk) = (positions(0, left_keys)?, positions(1, right_keys)?);
        let (lo, ro) = (positions(0, left_columns)?, positions(1, right_columns)?);
        let outer = [outer.0, outer.1];
        let mut fields: Vec<Field> = Vec::new();
        for (side, cols) in [(0, &lo), (1, &ro)] {
            for &(i, _) in cols.iter() {
                let f = sides[side].schema.field(i).clone();
                let padded = outer[1 - side];
                fields.push(if padded { f.with_nullable(true) } else { f });
            }
        }
        for (i, f) in fields.iter().enumerate() {
            if fields[..i].iter().any(|g| g.name() == f.name()) {
                return Err(Error::plan(format!(
                    "join output has two columns named `{}`; rename one side first",
                    f.name()
                )));
            }
        }
        fields.push(row_kind_field());
        let key_schema = Arc::new(Schema::new(
            lk.iter()
                .map(|&(i, _)| left.schema.field(i).clone().with_nullable(true))
                .collect::<Vec<_>>(),
        ));
        let at = |v: &[(usize, usize)]| v.iter().map(|p| p.1).collect::<Vec<_>>();
        let input = |v: &[(usize, usize)]| v.iter().map(|p| p.0).collect::<Vec<_>>();
        Ok(Self {
            data,
            keys: [at(&lk), at(&rk)],
            key_inputs: [input(&lk), input(&rk)],
            outputs: [at(&lo), at(&ro)],
            outer,
            key_schema,
            schema: StreamSchema::with_timestamp(fields),
            sides,
        })
    }
}

/// The columns of `schema` that identify a row: all but `_timestamp` and `_row_kind`.
fn data_columns(schema: &StreamSchema) -> Vec<usize> {
    let kind = schema.row_kind_index();
    (0..schema.schema.fields().len())
        .filter(|&i| i != schema.timestamp_index && Some(i) != kind)
        .collect()
}

impl OperatorFactory for ChangelogJoinFactory {
    fn describe(&self) -> String {
        let names = |side: usize| {
            self.key_inputs[side]
                .iter()
                .map(|&i| self.sides[side].schema.field(i).name().clone())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let kind = match self.outer {
            [true, true] => "full outer join",
            [true, false] => "left outer join",
            [false, true] => "right outer join",
            [false, false] => "inner join",
        };
        format!(
            "{kind} of changelogs on ({}) = ({}), changelog",
            names(0),
            names(1)
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
        Some(self.key_inputs[input.min(1)].clone())
    }
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(self.operator(ctx)?))
    }
}

impl ChangelogJoinFactory {
    fn operator(&self, ctx: &OperatorContext) -> Result<ChangelogJoin> {
        let converter = |side: usize| {
            RowConverter::new(
                self.data[side]
                    .iter()
                    .map(|&i| SortField::new(self.sides[side].schema.field(i).data_type().clone()))
                    .collect(),
            )
        };
        Ok(ChangelogJoin {
            sides: self.sides.clone(),
            data: self.data.clone(),
            keys: self.keys.clone(),
            outputs: self.outputs.clone(),
            outer: self.outer,
            schema: self.schema.clone(),
            key_schema: self.key_schema.clone(),
            converters: [converter(0)?, converter(1)?],
            table: GroupKeys::for_matchable(&self.key_schema)?,
            keyed: Vec::new(),
            null_keyed: Default::default(),
            max_parallelism: ctx.max_parallelism,
            operator: ctx.operator_id.0.clone(),
        })
    }
}

struct ChangelogJoin {
    sides: [StreamSchema; 2],
    data: [Vec<usize>; 2],
    keys: [Vec<usize>; 2],
    outputs: [Vec<usize>; 2],
    outer: Outer,
    schema: StreamSchema,
    key_schema: SchemaRef,
    /// Per side, rows of its `data` columns to and from Arrow's row format.
    converters: [RowConverter; 2],
    /// Key → dense id, the index into `keyed`.
    table: GroupKeys,
    keyed: Vec<KeyRows>,
    /// Per side, its rows whose key holds a NULL: they join nothing, but are held so
    /// that their withdrawals are checked and a restore pads them as before.
    null_keyed: [KeyRows; 2],
    max_parallelism: u16,
    operator: String,
}

impl ChangelogJoin {
    /// `side`'s key columns of rows given as that side's `data` columns, cast to one
    /// key type for both sides.
    fn key_columns(&self, side: usize, data: &[ArrayRef]) -> Result<Vec<ArrayRef>> {
        self.keys[side]
            .iter()
            .zip(self.key_schema.fields())
            .map(|(&k, f)| Ok(cast(&data[k], f.data_type())?))
            .collect()
    }

    /// Applies rows of `side` (given as its `data` columns, event times and kinds; no
    /// kinds: inserts) in order, appending what they emit to `out` and, for each, the
    /// input row that made it to `made_by`. Every row emitted holds that input row on
    /// `side`, or is padded there (`pairs.rs`): the emitted batch takes that side's
    /// columns from the input instead of decoding them again.
    fn apply(
        &mut self,
        side: usize,
        data: &[ArrayRef],
        ts: &[i64],
        kinds: Option<&[RowKind]>,
        out: &mut Vec<Emit>,
        made_by: &mut Vec<u32>,
    ) -> Result<()> {
        let rows = self.converters[side].convert_columns(data)?;
        let ids = self.key_ids(side, data)?;
        for (r, (&t, id)) in ts.iter().zip(ids).enumerate() {
            let row = rows.row(r);
            let kind = kinds.map_or(RowKind::Insert, |k| k[r]);
            let key = match id {
                Some(id) => &mut self.keyed[id],
                None => &mut self.null_keyed[side],
            };
            if kind.is_retraction() {
                key.withdraw(side, row.as_ref(), self.outer, out).map_err(|_| {
                    Error::plan(format!(
                        "join `{}`: a withdrawn {} row was never added: the input is not a changelog of the rows it added",
                        self.operator, SIDE_NAMES[side]
                    ))
                })?;
            } else {
                key.add(side, Arc::from(row.as_ref()), t, self.outer, out);
            }
            made_by.resize(out.len(), r as u32);
        }
        Ok(())
    }

    /// The key id of each row of `side` (given as its `data` columns), `None` for a
    /// row whose key holds a NULL (it joins nothing); `keyed` has a place for each id.
    fn key_ids(&mut self, side: usize, data: &[ArrayRef]) -> Result<Vec<Option<usize>>> {
        let keys = self.key_columns(side, data)?;
        let ids = self.table.intern_matchable(&keys)?;
        if self.keyed.len() < self.table.len() {
            self.keyed.resize_with(self.table.len(), KeyRows::default);
        }
        Ok(ids.into_iter().map(|id| id.map(|id| id as usize)).collect())
    }

    /// The rows `emits` describe, as one output batch: the side `input` of each from
    /// the input's `data` row `made_by` gives, the other side decoded from the state.
    fn emitted(
        &self,
        (input, data): (usize, &[ArrayRef]),
        emits: &[Emit],
        made_by: &[u32],
    ) -> Result<RecordBatch> {
        let n = emits.len();
        let mut columns: Vec<ArrayRef> = Vec::new();
        for side in 0..2 {
            let fields = &self.schema.schema.fields()[columns.len()..];
            let present = present_len(emits, side);
            if present == 0 {
                for f in fields.iter().take(self.outputs[side].len()) {
                    columns.push(new_null_array(f.data_type(), n));
                }
                continue;
            }
            if side == input {
                let indices: UInt32Array = (emits.iter().zip(made_by))
                    .map(|(e, &r)| e.rows[side].as_ref().map(|_| r))
                    .collect();
                for &p in &self.outputs[side] {
                    columns.push(take(&data[p], &indices, None)?);
                }
                continue;
            }
            let parser = self.converters[side].parser();
            let held = (emits.iter())
                .filter_map(|e| e.rows[side].as_deref())
                .map(|b| parser.parse(b));
            let arrays = self.converters[side].convert_rows(held)?;
            let mut next = 0u32;
            let indices: UInt32Array = (emits.iter())
                .map(|e| {
                    e.rows[side].as_ref().map(|_| {
                        next += 1;
                        next - 1
                    })
                })
                .collect();
            for &p in &self.outputs[side] {
                columns.push(if present < n {
                    take(&arrays[p], &indices, None)?
                } else {
                    arrays[p].clone()
                });
            }
        }
        columns.push(Arc::new(row_kind_array(emits.iter().map(|e| e.kind))));
        let ts: Vec<i64> = emits.iter().map(|e| e.ts).collect();
        columns.push(crate::window::timestamp_array(ts));
        Ok(RecordBatch::try_new(self.schema.schema.clone(), columns)?)
    }
}

fn present_len(emits: &[Emit], side: usize) -> usize {
    emits.iter().filter(|e| e.rows[side].is_some()).count()
}

impl Operator for ChangelogJoin {
    fn on_batch(
        &mut self,
        input: usize,
        batch: RecordBatch,
        out: &mut Vec<RecordBatch>,
    ) -> Result<()> {
        let side = input.min(1);
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let kinds = row_kinds(&batch)?;
        let data: Vec<ArrayRef> = self.data[side]
            .iter()
            .map(|&i| batch.column(i).clone())
            .collect();
        let ts = batch
            .column(self.sides[side].timestamp_index)
            .as_primitive::<TimestampNanosecondType>()
            .values()
            .to_vec();
        let (mut emits, mut made_by) = (Vec::new(), Vec::new());
        self.apply(side, &data, &ts, kinds.as_deref(), &mut emits, &mut made_by)?;
        if !emits.is_empty() {
            out.push(self.emitted((side, &data), &emits, &made_by)?);
        }
        Ok(())
    }

    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        self.snapshot_state()
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        self.restore_state(state)
    }
}

#[cfg(test)]
mod tests;
