//! Numbers computed as Flink computes them where DataFusion's kernels differ, checked
//! against Flink 2.3's answers (`tests/flink_docs/cases/arithmetic_casts.sql`):
//! - `CAST(double AS DECIMAL(p, s))` rounds half up from the shortest decimal text of
//!   the double (Flink's `BigDecimal.valueOf`): `CAST(33.605 AS DECIMAL(10, 2))` is
//!   33.61, where Arrow's cast scales the binary value and gives 33.60. A value past the
//!   precision is NULL, as in Flink.
//! - A `DECIMAL` divided by a `DECIMAL` or an integer is refused: Flink's result scale is
//!   `max(6, s1 + p2 + 1)` and DataFusion's is another, so the quotient would be rounded
//!   at another digit.

use crate::decimal_text::ShortestDecimal;
use crate::error::{Result, SqlError};
use datafusion::arrow::array::{Array, ArrayRef, AsArray, Decimal128Array};
use datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{exec_err, DFSchema, ScalarValue};
use datafusion::logical_expr::{
    BinaryExpr, Cast, ColumnarValue, Expr, ExprSchemable, Operator, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, TryCast, Volatility,
};
use std::sync::Arc;

/// `expr` with its casts of doubles to decimals computed as in Flink.
///
/// # Errors
/// A decimal division, refused.
pub(super) fn values_as_flink_numbers(expr: &Expr, schema: &DFSchema) -> Result<Expr> {
    let mut refused: Option<SqlError> = None;
    let out = expr
        .clone()
        .transform_up(|e| {
            if let Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::Divide,
                right,
            }) = &e
            {
                let decimal = |x: &Expr| {
                    matches!(x.get_type(schema), Ok(DataType::Decimal128(..) | DataType::Decimal256(..)))
                };
                if decimal(left) || decimal(right) {
                    refused = Some(SqlError::unsupported(
                        format!("the DECIMAL division `{e}`"),
                        "Flink gives the quotient max(6, s1 + p2 + 1) digits after the point and riffle would round it elsewhere: divide DOUBLEs (CAST(a AS DOUBLE) / b), or multiply by a DECIMAL constant",
                    ));
                }
                return Ok(Transformed::no(e));
            }
            let (Expr::Cast(Cast { expr: inner, field })
            | Expr::TryCast(TryCast { expr: inner, field })) = &e
            else {
                return Ok(Transformed::no(e));
            };
            let DataType::Decimal128(precision, scale) = field.data_type() else {
                return Ok(Transformed::no(e));
            };
            if !matches!(
                inner.get_type(schema),
                Ok(DataType::Float64 | DataType::Float32)
            ) {
                return Ok(Transformed::no(e));
            }
            let udf = ScalarUDF::from(DoubleToDecimal {
                precision: *precision,
                scale: *scale,
                signature: Signature::any(1, Volatility::Immutable),
            });
            Ok(Transformed::yes(udf.call(vec![inner.as_ref().clone()])))
        })?
        .data;
    match refused {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// `CAST(double AS DECIMAL(precision, scale))` as Flink computes it.
#[derive(Debug, PartialEq, Eq, Hash)]
struct DoubleToDecimal {
    precision: u8,
    scale: i8,
    signature: Signature,
}

/// The unscaled value of `x` at `scale`, rounded half up from its shortest decimal text;
/// `None` for NaN, the infinities, and values with more than `precision` digits.
fn decimal_of(x: f64, precision: u8, scale: i8) -> Option<i128> {
    let shortest = ShortestDecimal::of(x)?;
    let unscaled = i128::try_from(shortest.at_scale(i64::from(scale), true)?).ok()?;
    let limit = 10i128.checked_pow(u32::from(precision))?;
    (unscaled < limit).then_some(if x < 0.0 { -unscaled } else { unscaled })
}

impl ScalarUDFImpl for DoubleToDecimal {
    fn name(&self) -> &str {
        "flink_cast_to_decimal"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(DataType::Decimal128(self.precision, self.scale))
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        let [x] = args.args.as_slice() else {
            return exec_err!("CAST takes one value");
        };
        let scalar = matches!(x, ColumnarValue::Scalar(_));
        let x = x.to_array(args.number_rows)?;
        let (p, s) = (self.precision, self.scale);
        let values: Vec<Option<i128>> = match x.data_type() {
            DataType::Float64 => x
                .as_primitive::<Float64Type>()
                .iter()
                .map(|v| decimal_of(v?, p, s))
                .collect(),
            DataType::Float32 => x
                .as_primitive::<Float32Type>()
                .iter()
                .map(|v| decimal_of(f64::from(v?), p, s))
                .collect(),
            other => return exec_err!("CAST of {other} to DECIMAL here"),
        };
        let out: ArrayRef = Arc::new(Decimal128Array::from(values).with_precision_and_scale(p, s)?);
        Ok(if scalar && out.len() == 1 {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_double_becomes_a_decimal_rounded_half_up_from_its_shortest_text() {
        // Flink 2.3: CAST(33.605 AS DECIMAL(10, 2)) = 33.61 (Arrow's cast: 33.60).
        assert_eq!(decimal_of(33.605, 10, 2), Some(3361));
        assert_eq!(decimal_of(-33.605, 10, 2), Some(-3361));
        assert_eq!(decimal_of(1.375, 10, 2), Some(138));
        assert_eq!(decimal_of(0.285, 10, 2), Some(29));
        assert_eq!(decimal_of(12.0, 10, 3), Some(12_000));
        assert_eq!(decimal_of(1e-9, 10, 2), Some(0));
        assert_eq!(decimal_of(1.5e10, 20, 2), Some(1_500_000_000_000));
    }

    #[test]
    fn past_the_precision_or_not_a_number_is_null() {
        assert_eq!(decimal_of(123.45, 4, 2), None);
        assert_eq!(decimal_of(99.995, 4, 2), None);
        assert_eq!(decimal_of(99.994, 4, 2), Some(9999));
        assert_eq!(decimal_of(f64::NAN, 10, 2), None);
        assert_eq!(decimal_of(f64::INFINITY, 10, 2), None);
        assert_eq!(decimal_of(1e300, 38, 2), None);
    }
}
