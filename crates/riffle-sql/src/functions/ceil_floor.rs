//! `CEIL(x)` and `FLOOR(x)` with Flink's result types: an integer stays the integer it
//! is (DataFusion's returns a DOUBLE), a `DECIMAL(p, s)` becomes `DECIMAL(p, 0)`, and
//! `FLOAT` / `DOUBLE` keep their type. The values in the tests are Flink 2.3's answers
//! (PyFlink, with `TYPEOF` for the types).

use datafusion::arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use datafusion::arrow::datatypes::{DataType, Decimal128Type, Float32Type, Float64Type};
use datafusion::common::{exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use std::sync::Arc;

#[derive(Debug, PartialEq, Eq, Hash)]
struct CeilFloor {
    /// `ceil`, else `floor`.
    up: bool,
    signature: Signature,
}

/// `CEIL` (`up`) or `FLOOR` of a decimal's unscaled value at `scale`, to scale 0.
fn round_decimal(unscaled: i128, scale: i8, up: bool) -> i128 {
    let Ok(digits) = u32::try_from(scale) else {
        return unscaled;
    };
    let unit = 10i128.pow(digits);
    let (whole, rest) = (unscaled.div_euclid(unit), unscaled.rem_euclid(unit));
    if up && rest > 0 {
        whole + 1
    } else {
        whole
    }
}

impl ScalarUDFImpl for CeilFloor {
    fn name(&self) -> &str {
        if self.up {
            "ceil"
        } else {
            "floor"
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> datafusion::common::Result<DataType> {
        match args {
            [t] if t.is_integer() || matches!(t, DataType::Float32 | DataType::Float64) => {
                Ok(t.clone())
            }
            [DataType::Decimal128(p, _)] => Ok(DataType::Decimal128(*p, 0)),
            [DataType::Null] => Ok(DataType::Float64),
            [other] => plan_err!(
                "{}() takes a number, not {other}",
                self.name().to_uppercase()
            ),
            _ => plan_err!("{}() takes one argument", self.name().to_uppercase()),
        }
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        let [x] = args.args.as_slice() else {
            return exec_err!("{}() takes one argument", self.name().to_uppercase());
        };
        let x = x.to_array(args.number_rows)?;
        let up = self.up;
        let out: ArrayRef = match x.data_type() {
            t if t.is_integer() => x,
            DataType::Null => Arc::new(PrimitiveArray::<Float64Type>::new_null(x.len())),
            DataType::Float64 => Arc::new(
                x.as_primitive::<Float64Type>()
                    .unary::<_, Float64Type>(|v| if up { v.ceil() } else { v.floor() }),
            ),
            DataType::Float32 => Arc::new(
                x.as_primitive::<Float32Type>()
                    .unary::<_, Float32Type>(|v| if up { v.ceil() } else { v.floor() }),
            ),
            DataType::Decimal128(p, s) => {
                let (p, s) = (*p, *s);
                Arc::new(
                    x.as_primitive::<Decimal128Type>()
                        .unary::<_, Decimal128Type>(|v| round_decimal(v, s, up))
                        .with_precision_and_scale(p, 0)?,
                )
            }
            other => return exec_err!("{}() of {other}", self.name().to_uppercase()),
        };
        Ok(ColumnarValue::Array(out))
    }
}

/// Flink's `CEIL`, replacing DataFusion's function of that name.
pub fn ceil_udf() -> ScalarUDF {
    ScalarUDF::from(CeilFloor {
        up: true,
        signature: Signature::any(1, Volatility::Immutable),
    })
}

/// Flink's `FLOOR`, replacing DataFusion's function of that name.
pub fn floor_udf() -> ScalarUDF {
    ScalarUDF::from(CeilFloor {
        up: false,
        signature: Signature::any(1, Volatility::Immutable),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Decimal128Array, Float64Array, Int32Array};
    use datafusion::arrow::datatypes::Field;
    use datafusion::config::ConfigOptions;

    fn call(udf: &ScalarUDF, x: ArrayRef) -> ArrayRef {
        let return_type = udf.return_type(&[x.data_type().clone()]).unwrap();
        let args = ScalarFunctionArgs {
            args: vec![ColumnarValue::Array(x.clone())],
            arg_fields: vec![Arc::new(Field::new("x", x.data_type().clone(), true))],
            number_rows: x.len(),
            return_field: Arc::new(Field::new("out", return_type, true)),
            config_options: Arc::new(ConfigOptions::default()),
        };
        match udf.invoke_with_args(args).unwrap() {
            ColumnarValue::Array(a) => a,
            ColumnarValue::Scalar(s) => s.to_array().unwrap(),
        }
    }

    #[test]
    fn integers_keep_their_type_as_in_flink() {
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![Some(5), Some(-5), None]));
        for udf in [ceil_udf(), floor_udf()] {
            let out = call(&udf, ints.clone());
            assert_eq!(out.data_type(), &DataType::Int32);
            assert_eq!(&out, &ints);
        }
    }

    #[test]
    fn doubles_and_decimals_round_as_in_flink() {
        let doubles: ArrayRef = Arc::new(Float64Array::from(vec![2.5, -2.5]));
        assert_eq!(
            call(&ceil_udf(), doubles.clone())
                .as_primitive::<Float64Type>()
                .values(),
            &[3.0, -2.0]
        );
        assert_eq!(
            call(&floor_udf(), doubles)
                .as_primitive::<Float64Type>()
                .values(),
            &[2.0, -3.0]
        );
        // Flink: CEIL(CAST(2.5 AS DECIMAL(5, 2))) is 3 of DECIMAL(5, 0); of -2.25 as
        // DECIMAL(10, 2), CEIL -2 and FLOOR -3.
        let decimals: ArrayRef = Arc::new(
            Decimal128Array::from(vec![250, -225])
                .with_precision_and_scale(10, 2)
                .unwrap(),
        );
        let up = call(&ceil_udf(), decimals.clone());
        assert_eq!(up.data_type(), &DataType::Decimal128(10, 0));
        assert_eq!(up.as_primitive::<Decimal128Type>().values(), &[3, -2]);
        let down = call(&floor_udf(), decimals);
        assert_eq!(down.as_primitive::<Decimal128Type>().values(), &[2, -3]);
    }
}
