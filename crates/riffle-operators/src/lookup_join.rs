//! A stream joined with a lookup table: each row's key is looked up as the row passes,
//! and the row leaves joined with every table row of that key (an inner join drops rows
//! without one; a left join keeps them with NULLs). The operator keeps no state: what
//! the table answered is not checkpointed, so a replay asks again (docs/engine.md,
//! "Lookup joins").

use riffle_core::arrow::array::{new_null_array, Array, ArrayRef, UInt32Array};
use riffle_core::arrow::compute::kernels::cast::can_cast_types;
use riffle_core::arrow::compute::{cast, interleave, take};
use riffle_core::arrow::datatypes::{Field, Schema, SchemaRef};
use riffle_core::{
    Error, LookupTable, LookupTableFactory, Operator, OperatorContext, OperatorFactory,
    RecordBatch, Result, StreamSchema,
};
use std::sync::Arc;

/// Which stream rows a lookup join emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupJoinKind {
    /// Rows with at least one table row of their key.
    Inner,
    /// Every row; those without a table row get NULLs for the table's columns.
    Left,
}

/// Plans a lookup join.
#[derive(Debug)]
pub struct LookupJoinFactory {
    table: Arc<dyn LookupTableFactory>,
    stream_key: Vec<usize>,
    table_key: Vec<usize>,
    kind: LookupJoinKind,
    /// Input columns other than `_timestamp`, in order.
    passed: Vec<usize>,
    input_timestamp: usize,
    schema: StreamSchema,
}

impl LookupJoinFactory {
    /// Joins `input` on `stream_key` (its column names) with `table` on `table_key`
    /// (the table's column names, pairwise). The output has the input's columns, then
    /// the table's named `table_names`, then `_timestamp`.
    ///
    /// # Errors
    /// A name that is not a column, keys of types that cannot be compared, or output
    /// names that clash.
    pub fn new(
        input: &StreamSchema,
        stream_key: &[&str],
        table: Arc<dyn LookupTableFactory>,
        table_key: &[&str],
        table_names: &[String],
        kind: LookupJoinKind,
    ) -> Result<Self> {
        let table_schema: SchemaRef = table.schema();
        if stream_key.is_empty() || stream_key.len() != table_key.len() {
            return Err(Error::plan(
                "a lookup join needs equal numbers of key columns on both sides",
            ));
        }
        if table_names.len() != table_schema.fields().len() {
            return Err(Error::plan("one output name per lookup table column"));
        }
        let stream_key = stream_key
            .iter()
            .map(|k| input.index_of(k))
            .collect::<Result<Vec<_>>>()?;
        let table_key = table_key
            .iter()
            .map(|k| {
                table_schema
                    .index_of(k)
                    .map_err(|_| Error::plan(format!("the lookup table has no column `{k}`")))
            })
            .collect::<Result<Vec<_>>>()?;
        for (&s, &t) in stream_key.iter().zip(&table_key) {
            let (from, to) = (input.schema.field(s), table_schema.field(t));
            if !can_cast_types(from.data_type(), to.data_type()) {
                return Err(Error::plan(format!(
                    "`{}` ({}) cannot be compared with the lookup table's `{}` ({})",
                    from.name(),
                    from.data_type(),
                    to.name(),
                    to.data_type()
                )));
            }
        }
        let passed: Vec<usize> = (0..input.schema.fields().len())
            .filter(|&i| i != input.timestamp_index)
            .collect();
        let mut fields: Vec<Field> = passed
            .iter()
            .map(|&i| input.schema.field(i).clone())
            .collect();
        for (f, name) in table_schema.fields().iter().zip(table_names) {
            if fields.iter().any(|g| g.name() == name) {
                return Err(Error::plan(format!(
                    "the lookup join's output has two columns named `{name}`; alias one"
                )));
            }
            // An inner join may find table rows with NULLs; a left join adds some.
            fields.push(Field::new(name, f.data_type().clone(), true));
        }
        Ok(Self {
            table,
            stream_key,
            table_key,
            kind,
            passed,
            input_timestamp: input.timestamp_index,
            schema: StreamSchema::with_timestamp(fields),
        })
    }
}

impl OperatorFactory for LookupJoinFactory {
    fn describe(&self) -> String {
        let schema = self.table.schema();
        let on: Vec<String> = self
            .table_key
            .iter()
            .map(|&k| schema.field(k).name().clone())
            .collect();
        let kind = match self.kind {
            LookupJoinKind::Inner => "lookup_join",
            LookupJoinKind::Left => "lookup_left_join",
        };
        format!("{kind}({} ON {})", self.table.describe(), on.join(", "))
    }

    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }

    fn is_stateful(&self) -> bool {
        false
    }

    fn create(&self, _: &OperatorContext) -> Result<Box<dyn Operator>> {
        let schema = self.table.schema();
        Ok(Box::new(LookupJoinOperator {
            table: self.table.open(&self.table_key)?,
            key_types: self
                .table_key
                .iter()
                .map(|&k| schema.field(k).data_type().clone())
                .collect(),
            stream_key: self.stream_key.clone(),
            table_schema: schema,
            kind: self.kind,
            passed: self.passed.clone(),
            input_timestamp: self.input_timestamp,
            schema: self.schema.clone(),
        }))
    }
}

struct LookupJoinOperator {
    table: Box<dyn LookupTable>,
    key_types: Vec<riffle_core::arrow::datatypes::DataType>,
    stream_key: Vec<usize>,
    table_schema: SchemaRef,
    kind: LookupJoinKind,
    passed: Vec<usize>,
    input_timestamp: usize,
    schema: StreamSchema,
}

impl Operator for LookupJoinOperator {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let keys: Vec<ArrayRef> = self
            .stream_key
            .iter()
            .zip(&self.key_types)
            .map(|(&i, ty)| cast(batch.column(i), ty))
            .collect::<std::result::Result<_, _>>()?;
        let mut found = self.table.lookup(&keys)?;
        // Per output row: the input row, and the table batch and row joined to it.
        let pairs: Vec<(usize, (usize, usize))> = match self.kind {
            LookupJoinKind::Inner => found.rows.iter().map(|&(s, b, r)| (s, (b, r))).collect(),
            LookupJoinKind::Left => {
                let nulls = found.batches.len();
                // One row of NULLs, under the output's (nullable) table fields.
                let fields =
                    &self.schema.schema.fields()[self.passed.len()..self.schema.timestamp_index];
                found.batches.push(RecordBatch::try_new(
                    Arc::new(Schema::new(fields.to_vec())),
                    fields
                        .iter()
                        .map(|f| new_null_array(f.data_type(), 1))
                        .collect(),
                )?);
                let mut pairs = Vec::with_capacity(batch.num_rows());
                let mut next = found.rows.iter().peekable();
                for s in 0..batch.num_rows() {
                    let before = pairs.len();
                    while let Some(&(_, b, r)) = next.next_if(|m| m.0 == s) {
                        pairs.push((s, (b, r)));
                    }
                    if pairs.len() == before {
                        pairs.push((s, (nulls, 0)));
                    }
                }
                pairs
            }
        };
        if pairs.is_empty() {
            return Ok(());
        }
        let stream_rows = UInt32Array::from_iter_values(pairs.iter().map(|p| p.0 as u32));
        let table_rows: Vec<(usize, usize)> = pairs.iter().map(|p| p.1).collect();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.schema.fields().len());
        for &i in &self.passed {
            columns.push(take(batch.column(i).as_ref(), &stream_rows, None)?);
        }
        for c in 0..self.table_schema.fields().len() {
            let arrays: Vec<&dyn Array> =
                found.batches.iter().map(|b| b.column(c).as_ref()).collect();
            columns.push(interleave(&arrays, &table_rows)?);
        }
        columns.push(take(
            batch.column(self.input_timestamp).as_ref(),
            &stream_rows,
            None,
        )?);
        out.push(RecordBatch::try_new(self.schema.schema.clone(), columns)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::{AsArray, Int64Array, StringArray, TimestampNanosecondArray};
    use riffle_core::arrow::datatypes::{DataType, Int64Type};
    use riffle_core::LookupMatches;

    /// A table of `(key, name)` rows answering by scanning them.
    #[derive(Debug)]
    struct Rows(Vec<(i64, &'static str)>);

    impl LookupTableFactory for Rows {
        fn describe(&self) -> String {
            "rows".into()
        }
        fn schema(&self) -> SchemaRef {
            Arc::new(Schema::new(vec![
                Field::new("key", DataType::Int64, false),
                Field::new("name", DataType::Utf8, true),
            ]))
        }
        fn open(&self, _: &[usize]) -> Result<Box<dyn LookupTable>> {
            Ok(Box::new(RowsTable(self.0.clone(), self.schema())))
        }
    }

    struct RowsTable(Vec<(i64, &'static str)>, SchemaRef);

    impl LookupTable for RowsTable {
        fn lookup(&mut self, keys: &[ArrayRef]) -> Result<LookupMatches> {
            let all = RecordBatch::try_new(
                self.1.clone(),
                vec![
                    Arc::new(Int64Array::from_iter_values(self.0.iter().map(|r| r.0))),
                    Arc::new(StringArray::from_iter_values(self.0.iter().map(|r| r.1))),
                ],
            )?;
            let k = keys[0].as_primitive::<Int64Type>();
            let mut rows = Vec::new();
            for s in 0..k.len() {
                for (r, row) in self.0.iter().enumerate() {
                    if k.is_valid(s) && k.value(s) == row.0 {
                        rows.push((s, 0, r));
                    }
                }
            }
            Ok(LookupMatches {
                batches: vec![all],
                rows,
            })
        }
    }

    fn bids() -> (StreamSchema, RecordBatch) {
        let schema = StreamSchema::with_timestamp(vec![
            Field::new("auction", DataType::Int32, true),
            Field::new("price", DataType::Int64, false),
        ]);
        let batch = RecordBatch::try_new(
            schema.schema.clone(),
            vec![
                Arc::new(riffle_core::arrow::array::Int32Array::from(vec![
                    Some(1),
                    Some(2),
                    None,
                    Some(3),
                ])),
                Arc::new(Int64Array::from(vec![10, 20, 30, 40])),
                Arc::new(TimestampNanosecondArray::from(vec![1, 2, 3, 4]).with_timezone("UTC")),
            ],
        )
        .unwrap();
        (schema, batch)
    }

    fn run(kind: LookupJoinKind) -> RecordBatch {
        let (schema, batch) = bids();
        let table = Arc::new(Rows(vec![(1, "one"), (3, "three"), (3, "drei")]));
        let names = vec!["key".to_string(), "name".to_string()];
        let factory =
            LookupJoinFactory::new(&schema, &["auction"], table, &["key"], &names, kind).unwrap();
        let mut op = factory
            .create(&OperatorContext::detached("lookup", 0, 1))
            .unwrap();
        let mut out = Vec::new();
        op.on_batch(0, batch, &mut out).unwrap();
        out.remove(0)
    }

    fn column(batch: &RecordBatch, name: &str) -> Vec<String> {
        let c = batch.column(batch.schema().index_of(name).unwrap());
        (0..c.len())
            .map(|i| {
                riffle_core::arrow::util::display::array_value_to_string(c, i).unwrap_or_default()
            })
            .collect()
    }

    #[test]
    fn an_inner_lookup_join_emits_each_match_and_drops_rows_without_one() {
        let out = run(LookupJoinKind::Inner);
        assert_eq!(column(&out, "price"), ["10", "40", "40"]);
        assert_eq!(column(&out, "name"), ["one", "three", "drei"]);
        // The event time travels with its row.
        assert_eq!(out.num_columns(), 5);
        assert_eq!(column(&out, "_timestamp").len(), 3);
    }

    #[test]
    fn a_left_lookup_join_keeps_rows_without_a_match_with_nulls() {
        let out = run(LookupJoinKind::Left);
        assert_eq!(column(&out, "price"), ["10", "20", "30", "40", "40"]);
        assert_eq!(column(&out, "name"), ["one", "", "", "three", "drei"]);
        assert_eq!(out.column(3).null_count(), 2);
    }

    #[test]
    fn a_key_that_is_not_a_table_column_is_refused_at_planning() {
        let (schema, _) = bids();
        let names = vec!["key".to_string(), "name".to_string()];
        let table = Arc::new(Rows(vec![]));
        let err = LookupJoinFactory::new(
            &schema,
            &["auction"],
            table,
            &["nope"],
            &names,
            LookupJoinKind::Inner,
        )
        .unwrap_err();
        assert!(err.to_string().contains("no column `nope`"), "{err}");
    }
}
