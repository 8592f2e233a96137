//! Keeps the rows for which a boolean expression is true.

use crate::expr::{compile, CompiledExpr};
use datafusion_expr::Expr;
use riffle_core::arrow::array::AsArray;
use riffle_core::arrow::compute::filter_record_batch;
use riffle_core::arrow::datatypes::DataType;
use riffle_core::{
    Error, Operator, OperatorContext, OperatorFactory, RecordBatch, Result, StreamSchema,
};

/// Plans a filter.
#[derive(Debug)]
pub struct FilterFactory {
    predicate: CompiledExpr,
    schema: StreamSchema,
}

impl FilterFactory {
    /// Keeps rows of `input` where `predicate` is true (null counts as false).
    ///
    /// # Errors
    /// The predicate does not compile or is not boolean.
    pub fn new(input: &StreamSchema, predicate: Expr) -> Result<Self> {
        let predicate = compile(&predicate, input)?;
        if predicate.field.data_type() != &DataType::Boolean {
            return Err(Error::plan(format!(
                "filter `{}` is {}, not a boolean",
                predicate.logical,
                predicate.field.data_type()
            )));
        }
        Ok(Self {
            predicate,
            schema: input.clone(),
        })
    }
}

impl OperatorFactory for FilterFactory {
    fn describe(&self) -> String {
        format!("filter({})", self.predicate.logical)
    }

    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }

    fn is_stateful(&self) -> bool {
        false
    }

    fn create(&self, _: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(FilterOperator {
            predicate: self.predicate.clone(),
        }))
    }
}

struct FilterOperator {
    predicate: CompiledExpr,
}

impl Operator for FilterOperator {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        let mask = self.predicate.evaluate(&batch)?;
        let filtered = filter_record_batch(&batch, mask.as_boolean())?;
        if filtered.num_rows() > 0 {
            out.push(filtered);
        }
        Ok(())
    }
}
