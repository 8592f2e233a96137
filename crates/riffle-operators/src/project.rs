//! Computes output columns from expressions; the event time and a changelog's row kind
//! are carried along.

use crate::expr::{compile, CompiledExpr};
use datafusion_expr::Expr;
use riffle_core::arrow::datatypes::Schema;
use riffle_core::{
    Error, Operator, OperatorContext, OperatorFactory, RecordBatch, Result, StreamSchema,
    ROW_KIND_FIELD, TIMESTAMP_FIELD,
};
use std::sync::Arc;

/// Plans a projection.
#[derive(Debug)]
pub struct ProjectFactory {
    exprs: Vec<CompiledExpr>,
    input_timestamp: usize,
    input_row_kind: Option<usize>,
    schema: StreamSchema,
}

impl ProjectFactory {
    /// Emits one column per expression (named by its alias), then `_row_kind` when the
    /// input is a changelog, then `_timestamp`.
    ///
    /// # Errors
    /// An expression does not compile, two outputs share a name, or an output is
    /// named `_timestamp` or `_row_kind`.
    pub fn new(input: &StreamSchema, exprs: Vec<Expr>) -> Result<Self> {
        let exprs = exprs
            .iter()
            .map(|e| compile(e, input))
            .collect::<Result<Vec<_>>>()?;
        let mut fields: Vec<_> = exprs.iter().map(|e| e.field.clone()).collect();
        for (i, f) in fields.iter().enumerate() {
            if f.name() == TIMESTAMP_FIELD || f.name() == ROW_KIND_FIELD {
                return Err(Error::plan(format!(
                    "`{}` is carried automatically; do not project it",
                    f.name()
                )));
            }
            if fields[..i].iter().any(|g| g.name() == f.name()) {
                return Err(Error::plan(format!(
                    "two projected columns are named `{}`; alias one",
                    f.name()
                )));
            }
        }
        let input_row_kind = input.row_kind_index();
        if let Some(i) = input_row_kind {
            fields.push(input.schema.field(i).clone());
        }
        fields.push(input.schema.field(input.timestamp_index).clone());
        let schema = StreamSchema::new(Arc::new(Schema::new(fields)))?;
        Ok(Self {
            exprs,
            input_timestamp: input.timestamp_index,
            input_row_kind,
            schema,
        })
    }
}

impl OperatorFactory for ProjectFactory {
    fn describe(&self) -> String {
        let list: Vec<String> = self.exprs.iter().map(|e| e.logical.to_string()).collect();
        format!("project({})", list.join(", "))
    }

    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }

    fn is_stateful(&self) -> bool {
        false
    }

    fn create(&self, _: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(ProjectOperator {
            exprs: self.exprs.clone(),
            input_timestamp: self.input_timestamp,
            input_row_kind: self.input_row_kind,
            schema: self.schema.clone(),
        }))
    }
}

struct ProjectOperator {
    exprs: Vec<CompiledExpr>,
    input_timestamp: usize,
    input_row_kind: Option<usize>,
    schema: StreamSchema,
}

impl Operator for ProjectOperator {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        let mut columns = Vec::with_capacity(self.exprs.len() + 2);
        for e in &self.exprs {
            columns.push(e.evaluate(&batch)?);
        }
        if let Some(i) = self.input_row_kind {
            columns.push(batch.column(i).clone());
        }
        columns.push(batch.column(self.input_timestamp).clone());
        out.push(RecordBatch::try_new(self.schema.schema.clone(), columns)?);
        Ok(())
    }
}
