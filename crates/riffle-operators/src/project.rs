//! Computes output columns from expressions; the event time and a changelog's row kind
//! are carried along.

use crate::expr::{compile, CompiledExpr};
use datafusion_expr::Expr;
use riffle_core::arrow::datatypes::Schema;
use riffle_core::{
    row_kind_array, row_kind_field, Error, Operator, OperatorContext, OperatorFactory, RecordBatch,
    Result, RowKind, StreamSchema, ROW_KIND_FIELD, TIMESTAMP_FIELD,
};
use std::sync::Arc;

/// Plans a projection.
#[derive(Debug)]
pub struct ProjectFactory {
    exprs: Vec<CompiledExpr>,
    input_timestamp: usize,
    input_row_kind: Option<usize>,
    /// The input is append-only and the output a changelog of its rows as inserts.
    as_inserts: bool,
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
            as_inserts: false,
            schema,
        })
    }

    /// The same projection emitting a changelog: an append-only input's rows as inserts
    /// (`+I`), so that they can join a union of changelogs. A changelog input is left as
    /// it is.
    ///
    /// # Errors
    /// Never in practice (the schema keeps its event time).
    pub fn as_inserts(mut self) -> Result<Self> {
        if self.input_row_kind.is_some() || self.as_inserts {
            return Ok(self);
        }
        let mut fields: Vec<_> = self
            .schema
            .user_fields()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.push(row_kind_field());
        fields.push(
            self.schema
                .schema
                .field(self.schema.timestamp_index)
                .clone(),
        );
        self.schema = StreamSchema::new(Arc::new(Schema::new(fields)))?;
        self.as_inserts = true;
        Ok(self)
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
            as_inserts: self.as_inserts,
            schema: self.schema.clone(),
        }))
    }
}

struct ProjectOperator {
    exprs: Vec<CompiledExpr>,
    input_timestamp: usize,
    input_row_kind: Option<usize>,
    as_inserts: bool,
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
        } else if self.as_inserts {
            let inserts = std::iter::repeat_n(RowKind::Insert, batch.num_rows());
            columns.push(Arc::new(row_kind_array(inserts)));
        }
        columns.push(batch.column(self.input_timestamp).clone());
        out.push(RecordBatch::try_new(self.schema.schema.clone(), columns)?);
        Ok(())
    }
}
