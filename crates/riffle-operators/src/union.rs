//! `UNION ALL`: the rows of several inputs of one schema, as they come. Stateless; the
//! watermark is the least of the inputs' (the runtime's rule for every operator with
//! several inputs), and a changelog's rows keep their order per input.

use riffle_core::arrow::datatypes::{Field, Schema};
use riffle_core::{
    Error, Operator, OperatorContext, OperatorFactory, RecordBatch, Result, StreamSchema,
};
use std::sync::Arc;

/// Plans a union of `inputs` streams.
#[derive(Debug)]
pub struct UnionFactory {
    inputs: usize,
    schema: StreamSchema,
}

impl UnionFactory {
    /// The union of streams of `schemas`, which must hold the same columns in the same
    /// order with the same types; a column is nullable when it is in any input.
    ///
    /// # Errors
    /// Fewer than two inputs, or schemas that differ in names or types.
    pub fn new(schemas: &[&StreamSchema]) -> Result<Self> {
        let [first, rest @ ..] = schemas else {
            return Err(Error::plan("a union needs inputs"));
        };
        if rest.is_empty() {
            return Err(Error::plan("a union needs at least two inputs"));
        }
        let mut fields: Vec<Field> = first
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        for other in rest {
            let same_shape = other.schema.fields().len() == fields.len()
                && other.timestamp_index == first.timestamp_index
                && fields
                    .iter()
                    .zip(other.schema.fields())
                    .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
            if !same_shape {
                return Err(Error::plan(format!(
                    "union inputs differ: {:?} and {:?}",
                    first.schema.fields(),
                    other.schema.fields()
                )));
            }
            for (f, o) in fields.iter_mut().zip(other.schema.fields()) {
                if o.is_nullable() {
                    *f = f.clone().with_nullable(true);
                }
            }
        }
        Ok(Self {
            inputs: schemas.len(),
            schema: StreamSchema::new(Arc::new(Schema::new(fields)))?,
        })
    }
}

impl OperatorFactory for UnionFactory {
    fn describe(&self) -> String {
        format!("union all of {} inputs", self.inputs)
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn input_count(&self) -> usize {
        self.inputs
    }
    fn is_stateful(&self) -> bool {
        false
    }
    fn create(&self, _: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(UnionOperator {
            schema: self.schema.clone(),
        }))
    }
}

struct UnionOperator {
    schema: StreamSchema,
}

impl Operator for UnionOperator {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        // Same columns; only nullability may widen.
        out.push(batch.with_schema(self.schema.schema.clone())?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::{Int64Array, TimestampNanosecondArray};
    use riffle_core::arrow::datatypes::DataType;

    fn schema(nullable: bool) -> StreamSchema {
        StreamSchema::with_timestamp(vec![Field::new("v", DataType::Int64, nullable)])
    }

    #[test]
    fn rows_of_every_input_pass_in_the_widest_schema() {
        let (a, b) = (schema(false), schema(true));
        let f = UnionFactory::new(&[&a, &b]).unwrap();
        assert!(f.output_schema().schema.field(0).is_nullable());
        let mut op = f.create(&OperatorContext::detached("union", 0, 1)).unwrap();
        let mut out = Vec::new();
        let batch = RecordBatch::try_new(
            a.schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![1, 2])),
                Arc::new(TimestampNanosecondArray::from(vec![0, 0]).with_timezone("UTC")),
            ],
        )
        .unwrap();
        op.on_batch(0, batch.clone(), &mut out).unwrap();
        op.on_batch(1, batch, &mut out).unwrap();
        assert_eq!(out.iter().map(RecordBatch::num_rows).sum::<usize>(), 4);
    }

    #[test]
    fn inputs_of_other_columns_are_refused() {
        let other = StreamSchema::with_timestamp(vec![Field::new("w", DataType::Int64, false)]);
        assert!(UnionFactory::new(&[&schema(false), &other]).is_err());
        assert!(UnionFactory::new(&[&schema(false)]).is_err());
    }
}
