//! `ROUND(x[, digits])` and `TRUNCATE(x[, digits])` of a `DOUBLE` or `FLOAT` with Flink's
//! values. Flink rounds the shortest decimal text of the double (`BigDecimal.valueOf`),
//! half up for `ROUND` and toward zero for `TRUNCATE`, so `ROUND(0.285, 2)` is 0.29 and
//! `TRUNCATE(10.03, 2)` is 10.03; DataFusion's `round` and `trunc` scale the binary value
//! (`(x · 10^d).round() / 10^d`) and give 0.28 and 10.02. A `FLOAT` is widened to the
//! double first, as in Flink (`ROUND(CAST(0.285 AS FLOAT), 2)` is 0.28). Integers and
//! decimals go to DataFusion's functions, whose values are Flink's.
//!
//! NaN and the infinities are returned as they are; Flink fails the job on them (and
//! `TRUNCATE` of a double beyond a `DECIMAL(38)`, which riffle returns unchanged too).
//! The tests compare with Flink 2.3's answers for 2,300 values near the rounding edges
//! (`round_truncate_flink.tsv`, recorded by `scripts/flink-oracle/round_truncate.py`).

use crate::decimal_text::ShortestDecimal;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float32Array, Float64Array};
use datafusion::arrow::datatypes::{DataType, FieldRef, Float32Type, Float64Type, Int32Type};
use datafusion::common::{exec_err, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
};
use std::sync::Arc;

/// How the dropped digits change the kept ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Mode {
    /// `ROUND`: a first dropped digit of 5 or more rounds away from zero.
    HalfUp,
    /// `TRUNCATE`: dropped digits are dropped.
    Down,
}

/// `x` rounded (or truncated) to `digits` digits after the decimal point (before it
/// when negative), through the shortest decimal text of `x`.
fn round_decimal_text(x: f64, digits: i32, mode: Mode) -> f64 {
    let Some(shortest) = ShortestDecimal::of(x) else {
        return x;
    };
    if shortest.exponent + i64::from(digits) >= 0 {
        // Nothing to drop; BigDecimal has no negative zero.
        return if x == 0.0 { 0.0 } else { x };
    }
    // Digits are dropped, so the kept part is below the shortest digits: it fits.
    let kept = shortest
        .at_scale(i64::from(digits), mode == Mode::HalfUp)
        .unwrap_or(0);
    if kept == 0 {
        return 0.0;
    }
    let magnitude: f64 = format!("{kept}e{}", -i64::from(digits))
        .parse()
        .unwrap_or(f64::NAN);
    magnitude.copysign(x)
}

/// Flink's `ROUND` or `TRUNCATE`, replacing DataFusion's `round` / taking the name
/// `truncate`; integers and decimals go to `inner`, DataFusion's function.
#[derive(Debug, PartialEq, Eq, Hash)]
struct FlinkRounding {
    mode: Mode,
    inner: ScalarUDF,
}

impl FlinkRounding {
    fn digits(
        args: &ScalarFunctionArgs,
        rows: usize,
    ) -> datafusion::common::Result<Vec<Option<i32>>> {
        let Some(digits) = args.args.get(1) else {
            return Ok(vec![Some(0); rows]);
        };
        let digits = digits.cast_to(&DataType::Int32, None)?.to_array(rows)?;
        Ok(digits.as_primitive::<Int32Type>().iter().collect())
    }
}

impl ScalarUDFImpl for FlinkRounding {
    fn name(&self) -> &str {
        match self.mode {
            Mode::HalfUp => "round",
            Mode::Down => "truncate",
        }
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_field_from_args(
        &self,
        args: ReturnFieldArgs,
    ) -> datafusion::common::Result<FieldRef> {
        let field = self.inner.return_field_from_args(args)?;
        Ok(Arc::new(field.as_ref().clone().with_name(self.name())))
    }

    fn return_type(&self, args: &[DataType]) -> datafusion::common::Result<DataType> {
        self.inner.return_type(args)
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        let Some(x) = args.args.first() else {
            return exec_err!("{}() takes a number", self.name().to_uppercase());
        };
        let rows = args.number_rows;
        let scalar = matches!(x, ColumnarValue::Scalar(_))
            && args
                .args
                .iter()
                .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let mode = self.mode;
        let out: ArrayRef = match x.data_type() {
            DataType::Float64 => {
                let x = x.to_array(rows)?;
                let digits = Self::digits(&args, x.len())?;
                let x = x.as_primitive::<Float64Type>();
                Arc::new(Float64Array::from_iter(
                    x.iter()
                        .zip(digits)
                        .map(|(v, d)| Some(round_decimal_text(v?, d?, mode))),
                ))
            }
            DataType::Float32 => {
                let x = x.to_array(rows)?;
                let digits = Self::digits(&args, x.len())?;
                let x = x.as_primitive::<Float32Type>();
                Arc::new(Float32Array::from_iter(x.iter().zip(digits).map(
                    |(v, d)| Some(round_decimal_text(f64::from(v?), d?, mode) as f32),
                )))
            }
            _ => return self.inner.invoke_with_args(args),
        };
        Ok(if scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}

/// Flink's `ROUND`, replacing DataFusion's function of that name.
pub fn round_udf() -> ScalarUDF {
    ScalarUDF::from(FlinkRounding {
        mode: Mode::HalfUp,
        inner: datafusion::functions::math::round().as_ref().clone(),
    })
}

/// Flink's `TRUNCATE` (DataFusion's nearest is `trunc`).
pub fn truncate_udf() -> ScalarUDF {
    ScalarUDF::from(FlinkRounding {
        mode: Mode::Down,
        inner: datafusion::functions::math::trunc().as_ref().clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Flink 2.3's answers: function, type, x, digits, answer (`fails`: the job fails).
    const FLINK: &str = include_str!("round_truncate_flink.tsv");

    #[test]
    fn doubles_and_floats_round_and_truncate_to_flink_values_at_the_edges() {
        let mut checked = 0;
        let mut wrong = Vec::new();
        for line in FLINK.lines() {
            let [function, ty, x, digits, answer] = line.split('\t').collect::<Vec<_>>()[..] else {
                panic!("not five fields: {line}");
            };
            let mode = if function == "ROUND" {
                Mode::HalfUp
            } else {
                Mode::Down
            };
            let digits: i32 = digits.parse().unwrap();
            let x: f64 = x.parse().unwrap();
            if answer == "fails" {
                // riffle returns the value as it is.
                let got = round_decimal_text(x, digits, mode);
                assert!(got.to_bits() == x.to_bits() || (got.is_nan() && x.is_nan()));
                continue;
            }
            let answer: f64 = answer.parse().unwrap();
            let (got, want) = if ty == "FLOAT" {
                let got = round_decimal_text(f64::from(x as f32), digits, mode) as f32;
                (f64::from(got), f64::from(answer as f32))
            } else {
                (round_decimal_text(x, digits, mode), answer)
            };
            if got != want {
                wrong.push(format!(
                    "{function}(CAST({x} AS {ty}), {digits}) = {got}, Flink {want}"
                ));
            }
            checked += 1;
        }
        assert!(checked > 4000, "{checked} values");
        assert!(
            wrong.is_empty(),
            "{} differ:\n{}",
            wrong.len(),
            wrong.join("\n")
        );
    }

    #[test]
    fn the_issues_examples_take_flinks_values() {
        assert_eq!(round_decimal_text(0.285, 2, Mode::HalfUp), 0.29);
        assert_eq!(round_decimal_text(10.03, 2, Mode::Down), 10.03);
        assert_eq!(round_decimal_text(-2.5, 0, Mode::HalfUp), -3.0);
        assert_eq!(round_decimal_text(1234.5, -2, Mode::HalfUp), 1200.0);
        assert_eq!(round_decimal_text(0.0009, 2, Mode::HalfUp), 0.0);
    }

    #[test]
    fn any_digits_are_taken_without_overflow() {
        assert_eq!(round_decimal_text(123.4, i32::MIN, Mode::HalfUp), 0.0);
        assert_eq!(round_decimal_text(123.4, i32::MAX, Mode::HalfUp), 123.4);
        assert_eq!(round_decimal_text(1e-300, i32::MIN, Mode::Down), 0.0);
        assert_eq!(round_decimal_text(1e300, i32::MAX, Mode::Down), 1e300);
    }

    #[test]
    fn a_negative_result_of_zero_is_positive_zero() {
        let got = round_decimal_text(-0.001, 1, Mode::HalfUp);
        assert!(got == 0.0 && got.is_sign_positive());
        assert!(round_decimal_text(-0.0, 2, Mode::Down).is_sign_positive());
    }
}
