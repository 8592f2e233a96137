//! Logical DataFusion expressions compiled against a stream schema.

use datafusion_common::DFSchema;
use datafusion_expr::execution_props::ExecutionProps;
use datafusion_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion_expr::Expr;
use datafusion_physical_expr::{create_physical_expr, PhysicalExpr};
use riffle_core::arrow::array::ArrayRef;
use riffle_core::arrow::datatypes::Field;
use riffle_core::{Error, RecordBatch, Result, StreamSchema};
use std::sync::Arc;

/// A compiled expression and the field it produces.
#[derive(Debug, Clone)]
pub struct CompiledExpr {
    /// The logical expression, for display.
    pub logical: Expr,
    /// The physical expression evaluated on batches.
    pub physical: Arc<dyn PhysicalExpr>,
    /// Output field (name from the alias, or the expression's display).
    pub field: Field,
}

/// Compiles `expr` against `input`. Types must already match (the SQL planner coerces;
/// the Rust API casts explicitly, e.g. `cast(col("price"), DataType::Float64)`).
///
/// # Errors
/// Unknown columns or operators that do not apply to the column types.
pub fn compile(expr: &Expr, input: &StreamSchema) -> Result<CompiledExpr> {
    let df_schema = DFSchema::try_from(input.schema.as_ref().clone())?;
    let physical = create_physical_expr(
        expr,
        &df_schema,
        &ExecutionProps::new(),
        &PhysicalPlanningContext::default(),
    )
    .map_err(|e| Error::plan(format!("cannot compile `{expr}`: {e}")))?;
    let data_type = physical.data_type(&input.schema)?;
    let nullable = physical.nullable(&input.schema)?;
    let name = match expr {
        Expr::Alias(alias) => alias.name.clone(),
        Expr::Column(c) => c.name.clone(),
        other => other.schema_name().to_string(),
    };
    Ok(CompiledExpr {
        logical: expr.clone(),
        physical,
        field: Field::new(name, data_type, nullable),
    })
}

impl CompiledExpr {
    /// Evaluates on `batch`, always as an array of the batch's length.
    ///
    /// # Errors
    /// Evaluation failures (division by zero, overflow in checked casts, …).
    pub fn evaluate(&self, batch: &RecordBatch) -> Result<ArrayRef> {
        Ok(self
            .physical
            .evaluate(batch)?
            .into_array(batch.num_rows())?)
    }
}
