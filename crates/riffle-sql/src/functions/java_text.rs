//! Floating-point numbers as text the way Flink (Java's `Double.toString` and
//! `Float.toString`) writes them: `1.0`, `0.001`, `1.0E7`, `1.0E-4`, `NaN`,
//! `Infinity`. DataFusion's cast writes `10000000.0`, `0.0001`, `inf`; a different
//! text is a silently different value, so a `DOUBLE`/`FLOAT` turned into text goes
//! through this function (`translate/text.rs`).

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type};
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use std::sync::Arc;

/// Name of the function.
pub const JAVA_NUMBER_TEXT: &str = "riffle_java_number_text";

/// Java's text of a number given as Rust's shortest round-trip scientific form
/// (`format!("{:e}", x)`, e.g. `1.2345e-5`), which has the digits Java (since JDK 19)
/// picks too: the fewest that read back as the same number.
fn java_text(scientific: &str) -> String {
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((scientific, "0"));
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if digits.bytes().all(|d| d == b'0') {
        return format!("{sign}0.0");
    }
    // Java writes plain decimals for 10^-3 <= |x| < 10^7, scientific otherwise.
    if (-3..7).contains(&exponent) {
        let text = if exponent >= 0 {
            let point = exponent as usize + 1;
            let whole = if digits.len() >= point {
                digits[..point].to_string()
            } else {
                format!("{digits}{}", "0".repeat(point - digits.len()))
            };
            let fraction = digits.get(point..).filter(|f| !f.is_empty()).unwrap_or("0");
            format!("{whole}.{fraction}")
        } else {
            format!("0.{}{digits}", "0".repeat((-exponent - 1) as usize))
        };
        return format!("{sign}{text}");
    }
    let fraction = digits.get(1..).filter(|f| !f.is_empty()).unwrap_or("0");
    format!("{sign}{}.{fraction}E{exponent}", &digits[..1])
}

/// Java's `Double.toString(x)`.
pub fn java_double_text(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        java_text(&format!("{x:e}"))
    }
}

/// Java's `Float.toString(x)`.
pub fn java_float_text(x: f32) -> String {
    if x.is_nan() || x.is_infinite() {
        java_double_text(f64::from(x))
    } else {
        java_text(&format!("{x:e}"))
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct JavaNumberText {
    signature: Signature,
}

impl ScalarUDFImpl for JavaNumberText {
    fn name(&self) -> &str {
        JAVA_NUMBER_TEXT
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let [value] = args.args.as_slice() else {
            return exec_err!("{JAVA_NUMBER_TEXT} takes one number");
        };
        let value = value.to_array(n)?;
        let mut out = StringBuilder::with_capacity(n, n * 8);
        match value.data_type() {
            DataType::Float32 => {
                let v = value.as_primitive::<Float32Type>();
                for i in 0..n {
                    out.append_option((!v.is_null(i)).then(|| java_float_text(v.value(i))));
                }
            }
            _ => {
                let v = cast(&value, &DataType::Float64)?;
                let v = v.as_primitive::<Float64Type>();
                for i in 0..n {
                    out.append_option((!v.is_null(i)).then(|| java_double_text(v.value(i))));
                }
            }
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish()) as ArrayRef))
    }
}

/// The function, to register with the planner.
pub fn java_number_text_udf() -> ScalarUDF {
    ScalarUDF::from(JavaNumberText {
        signature: Signature::any(1, Volatility::Immutable),
    })
}

#[cfg(test)]
mod tests {
    use super::{java_double_text, java_float_text};

    #[test]
    fn doubles_read_as_javas_double_to_string() {
        // Values and texts as Java's Double.toString documents them.
        let cases = [
            (1.0, "1.0"),
            (-2.5, "-2.5"),
            (0.001, "0.001"),
            (0.0001, "1.0E-4"),
            (1234567.0, "1234567.0"),
            (1.0e7, "1.0E7"),
            (123456789.0, "1.23456789E8"),
            (0.1 + 0.2, "0.30000000000000004"),
            (100.0, "100.0"),
            (1.5e-10, "1.5E-10"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (f64::MAX, "1.7976931348623157E308"),
            (f64::MIN_POSITIVE, "2.2250738585072014E-308"),
        ];
        for (x, text) in cases {
            assert_eq!(java_double_text(x), text, "{x:e}");
        }
    }

    #[test]
    fn floats_keep_their_own_shortest_digits() {
        assert_eq!(java_float_text(0.1), "0.1");
        assert_eq!(java_float_text(1.0e10), "1.0E10");
        assert_eq!(java_float_text(3.4028235e38), "3.4028235E38");
    }
}
