//! `REGEXP_EXTRACT(text, regex[, group])`: Flink's group `group` (0 = the whole match,
//! the default) of the first match of `regex` in `text`; NULL when any argument is
//! NULL, nothing matches, or the group does not exist or did not take part.
//!
//! The pattern must be a literal, compiled once at planning: a pattern Rust's `regex`
//! does not accept (Java's look-around, back-references) is refused there, named,
//! rather than returning NULL on every row as Flink does for a pattern it rejects.

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Int64Type};
use datafusion::common::{exec_err, plan_err, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use regex::{CaptureLocations, Regex};
use std::sync::Arc;

/// Group `group` of the first match of `regex` in `text`, as Flink returns it; `slots`
/// (`regex.capture_locations()`) is reused from one text to the next.
pub fn regexp_extract<'t>(
    regex: &Regex,
    slots: &mut CaptureLocations,
    text: &'t str,
    group: i64,
) -> Option<&'t str> {
    let group = usize::try_from(group).ok()?;
    regex.captures_read(slots, text)?;
    let (start, end) = slots.get(group)?;
    text.get(start..end)
}

fn pattern(value: Option<&ScalarValue>) -> Result<Regex> {
    let Some(p) = super::string_literal(value) else {
        return plan_err!(
            "REGEXP_EXTRACT takes its pattern as a string literal, e.g. REGEXP_EXTRACT(url, 'id=([0-9]+)', 1)"
        );
    };
    Regex::new(p).or_else(|e| plan_err!("REGEXP_EXTRACT pattern '{p}' is not supported: {e}"))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct RegexpExtract {
    signature: Signature,
}

impl ScalarUDFImpl for RegexpExtract {
    fn name(&self) -> &str {
        "regexp_extract"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let n = args.arg_fields.len();
        if !(2..=3).contains(&n) {
            return plan_err!("REGEXP_EXTRACT takes text, a pattern and optionally a group");
        }
        if n == 3 && !args.arg_fields[2].data_type().is_integer() {
            return plan_err!(
                "REGEXP_EXTRACT's group is an integer, not {}",
                args.arg_fields[2].data_type()
            );
        }
        pattern(args.scalar_arguments.get(1).copied().flatten())?;
        Ok(Arc::new(Field::new(self.name(), DataType::Utf8, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let (text, regex, group) = match args.args.as_slice() {
            [t, ColumnarValue::Scalar(p)] => (t, pattern(Some(p))?, None),
            [t, ColumnarValue::Scalar(p), g] => (t, pattern(Some(p))?, Some(g)),
            _ => return exec_err!("REGEXP_EXTRACT takes a literal pattern"),
        };
        let text = cast(&text.to_array(n)?, &DataType::Utf8)?;
        let text = text.as_string::<i32>();
        let group = match group {
            Some(g) => Some(cast(&g.to_array(n)?, &DataType::Int64)?),
            None => None,
        };
        let group = group.as_ref().map(|g| g.as_primitive::<Int64Type>());
        let mut out = StringBuilder::with_capacity(n, n * 8);
        let mut slots = regex.capture_locations();
        for i in 0..n {
            let g = match group {
                Some(g) if g.is_null(i) => None,
                Some(g) => Some(g.value(i)),
                None => Some(0),
            };
            match g {
                Some(g) if !text.is_null(i) => {
                    out.append_option(regexp_extract(&regex, &mut slots, text.value(i), g))
                }
                _ => out.append_null(),
            }
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish()) as ArrayRef))
    }
}

/// `regexp_extract`, to register with the planner.
pub fn regexp_extract_udf() -> ScalarUDF {
    ScalarUDF::from(RegexpExtract {
        signature: Signature::variadic_any(Volatility::Immutable),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extract<'t>(regex: &Regex, text: &'t str, group: i64) -> Option<&'t str> {
        regexp_extract(regex, &mut regex.capture_locations(), text, group)
    }

    #[test]
    fn flinks_documented_example_and_nexmark_q21() {
        // Flink's documentation: REGEXP_EXTRACT('foothebar', 'foo(.*?)(bar)', 2) = 'bar'.
        let r = Regex::new("foo(.*?)(bar)").unwrap();
        assert_eq!(extract(&r, "foothebar", 2), Some("bar"));
        assert_eq!(extract(&r, "foothebar", 1), Some("the"));
        assert_eq!(extract(&r, "foothebar", 0), Some("foothebar"));
        let q21 = Regex::new("(&|^)channel_id=([^&]*)").unwrap();
        assert_eq!(extract(&q21, "channel_id=9&x=1", 2), Some("9"));
        assert_eq!(extract(&q21, "a=1&channel_id=abc", 2), Some("abc"));
        assert_eq!(extract(&q21, "a=1", 2), None);
    }

    #[test]
    fn missing_or_idle_groups_are_null() {
        let r = Regex::new("a(b)?(c)").unwrap();
        assert_eq!(extract(&r, "ac", 1), None);
        assert_eq!(extract(&r, "ac", 3), None);
        assert_eq!(extract(&r, "ac", -1), None);
    }

    #[test]
    fn patterns_rust_cannot_run_are_refused() {
        let p = ScalarValue::Utf8(Some("a(?=b)".into()));
        let e = pattern(Some(&p)).unwrap_err().to_string();
        assert!(e.contains("'a(?=b)' is not supported"), "{e}");
    }
}
