//! Values turned into text, as Flink writes them: DataFusion's casts to `VARCHAR` write
//! some types differently (booleans in lower case, floating-point numbers without Java's
//! `.0` and `E`, timestamps in ISO 8601), and a different text is a silently different
//! value.

use crate::error::{Result, SqlError};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::DFSchema;
use datafusion::logical_expr::{cast, lit, Expr};
use riffle_core::arrow::datatypes::DataType;

/// A boolean turned into text is `TRUE` or `FALSE`, as in Flink (DataFusion writes
/// `true`, `false`); a `DOUBLE` or `FLOAT` is written as Java writes it (`1.0`,
/// `1.0E7`, `1.0E-4`; DataFusion writes `10000000.0`, `0.0001`).
pub(super) fn values_as_flink_text(expr: &Expr, schema: &DFSchema) -> Result<Expr> {
    use datafusion::logical_expr::{not, when, Cast, ExprSchemable, TryCast};
    Ok(expr
        .clone()
        .transform_up(|e| {
            let (Expr::Cast(Cast { expr: inner, field })
            | Expr::TryCast(TryCast { expr: inner, field })) = &e
            else {
                return Ok(Transformed::no(e));
            };
            let text = matches!(
                field.data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            );
            if !text {
                return Ok(Transformed::no(e));
            }
            let value = inner.as_ref().clone();
            let flink = match inner.get_type(schema) {
                Ok(DataType::Boolean) => when(value.clone(), lit("TRUE"))
                    .when(not(value), lit("FALSE"))
                    .end()?,
                // Java's Double.toString / Float.toString: `1.0`, `1.0E7`.
                Ok(DataType::Float64 | DataType::Float32 | DataType::Float16) => {
                    crate::functions::java_number_text_udf().call(vec![value])
                }
                _ => return Ok(Transformed::no(e)),
            };
            Ok(Transformed::yes(cast(flink, field.data_type().clone())))
        })?
        .data)
}

/// Refuses a timestamp turned into text (`CAST(ts AS VARCHAR)`, or implicitly, as
/// DataFusion does for `CONCAT(ts, …)`): DataFusion writes ISO 8601
/// (`2023-11-14T23:59:30.250`) where Flink writes `2023-11-14 23:59:30.250`, and a
/// different text is a silently different value.
pub(super) fn refuse_timestamp_text(expr: &Expr, schema: &DFSchema) -> Result<()> {
    use datafusion::common::tree_node::TreeNodeRecursion;
    use datafusion::logical_expr::{Cast, ExprSchemable, TryCast};
    let mut found: Option<Expr> = None;
    let _ = expr.apply(|e| {
        let (Expr::Cast(Cast { expr: inner, field })
        | Expr::TryCast(TryCast { expr: inner, field })) = e
        else {
            return Ok(TreeNodeRecursion::Continue);
        };
        let text = matches!(
            field.data_type(),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        );
        if text && matches!(inner.get_type(schema), Ok(DataType::Timestamp(..))) {
            found = Some(inner.as_ref().clone());
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    match found {
        Some(ts) => Err(SqlError::unsupported(
            format!("the timestamp `{ts}` as text (a CAST to VARCHAR, or a string function given a timestamp)"),
            format!("riffle would write it as 2023-11-14T23:59:30.250, Flink as 2023-11-14 23:59:30.250: write DATE_FORMAT({ts}, 'yyyy-MM-dd HH:mm:ss.SSS') for Flink's text"),
        )),
        None => Ok(()),
    }
}
