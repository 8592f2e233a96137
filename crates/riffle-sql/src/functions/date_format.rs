//! `DATE_FORMAT(ts, 'yyyy-MM-dd HH:mm:ss')` with Flink's (Java `SimpleDateFormat`)
//! pattern letters. DataFusion's own `date_format` is `to_char` with strftime patterns,
//! under which a Java pattern has no `%` and comes back as the same text on every row;
//! riffle replaces it. The pattern is translated to strftime at planning time, and a
//! letter riffle does not know is refused there, naming it.

use datafusion::arrow::array::{Array, ArrayRef, StringBuilder};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::{exec_err, plan_err, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use std::sync::Arc;

/// Translates a Java date pattern to a strftime format; the error names what is not
/// supported.
pub fn java_to_strftime(pattern: &str) -> Result<String, String> {
    let mut out = String::new();
    let chars: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            // Quoted text; '' is a quote.
            let mut j = i + 1;
            if chars.get(j) == Some(&'\'') {
                out.push('\'');
                i += 2;
                continue;
            }
            loop {
                match (chars.get(j), chars.get(j + 1)) {
                    (Some('\''), Some('\'')) => {
                        out.push('\'');
                        j += 2;
                    }
                    (Some('\''), _) | (None, _) => break,
                    (Some(c), _) => {
                        push_literal(&mut out, *c);
                        j += 1;
                    }
                }
            }
            if j == chars.len() {
                return Err(format!("the quote at position {} is never closed", i + 1));
            }
            i = j + 1;
            continue;
        }
        if !c.is_ascii_alphabetic() {
            push_literal(&mut out, c);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|d| **d == c).count();
        let piece = match (c, run) {
            ('y', 2) => "%y",
            ('y', _) | ('u', _) => "%Y",
            ('M', 1) => "%-m",
            ('M', 2) => "%m",
            ('M', 3) => "%b",
            ('M', _) => "%B",
            ('d', 1) => "%-d",
            ('d', _) => "%d",
            ('D', _) => "%j",
            ('H', 1) => "%-H",
            ('H', _) => "%H",
            ('h', 1) => "%-I",
            ('h', _) => "%I",
            ('m', 1) => "%-M",
            ('m', _) => "%M",
            ('s', 1) => "%-S",
            ('s', _) => "%S",
            ('S', 3) => "%3f",
            ('S', 6) => "%6f",
            ('S', 9) => "%9f",
            ('a', _) => "%p",
            ('E', 1..=3) => "%a",
            ('E', _) => "%A",
            ('Z', _) => "%z",
            ('X', _) | ('x', _) => "%:z",
            _ => {
                return Err(format!(
                    "the pattern letter{} `{}` is not supported (riffle knows y, M, d, D, H, h, m, s, S as SSS, SSSSSS or SSSSSSSSS, a, E, Z, X; quote literal text as 'text')",
                    if run > 1 { "s" } else { "" },
                    chars[i..i + run].iter().collect::<String>()
                ))
            }
        };
        out.push_str(piece);
        i += run;
    }
    Ok(out)
}

fn push_literal(out: &mut String, c: char) {
    if c == '%' {
        out.push_str("%%");
    } else {
        out.push(c);
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct DateFormat {
    signature: Signature,
}

impl DateFormat {
    fn pattern(value: Option<&ScalarValue>) -> datafusion::common::Result<String> {
        let Some(p) = super::string_literal(value) else {
            return plan_err!(
                "DATE_FORMAT takes its pattern as a string literal, e.g. DATE_FORMAT(ts, 'yyyy-MM-dd HH:mm')"
            );
        };
        java_to_strftime(p).or_else(|e| plan_err!("DATE_FORMAT pattern '{p}': {e}"))
    }
}

impl ScalarUDFImpl for DateFormat {
    fn name(&self) -> &str {
        "date_format"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(
        &self,
        args: ReturnFieldArgs,
    ) -> datafusion::common::Result<FieldRef> {
        if args.arg_fields.len() != 2 {
            return plan_err!("DATE_FORMAT takes a timestamp and a pattern");
        }
        if !matches!(
            args.arg_fields[0].data_type(),
            DataType::Timestamp(..) | DataType::Date32 | DataType::Date64 | DataType::Null
        ) {
            return plan_err!(
                "DATE_FORMAT formats a TIMESTAMP or DATE, not {}; CAST the value first",
                args.arg_fields[0].data_type()
            );
        }
        Self::pattern(args.scalar_arguments.get(1).copied().flatten())?;
        Ok(Arc::new(Field::new(self.name(), DataType::Utf8, true)))
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        let [value, pattern] = args.args.as_slice() else {
            return exec_err!("DATE_FORMAT takes a timestamp and a pattern");
        };
        let ColumnarValue::Scalar(pattern) = pattern else {
            return exec_err!("DATE_FORMAT takes its pattern as a string literal");
        };
        let format = Self::pattern(Some(pattern))?;
        let array: ArrayRef = value.to_array(args.number_rows)?;
        let options = FormatOptions::new()
            .with_timestamp_format(Some(&format))
            .with_timestamp_tz_format(Some(&format))
            .with_date_format(Some(&format));
        let formatter = ArrayFormatter::try_new(array.as_ref(), &options)?;
        let mut out = StringBuilder::with_capacity(array.len(), array.len() * format.len());
        for i in 0..array.len() {
            if array.is_null(i) {
                out.append_null();
            } else {
                out.append_value(formatter.value(i).to_string());
            }
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// `date_format` with Java patterns, to register with the planner (it replaces
/// DataFusion's function of that name).
pub fn date_format_udf() -> ScalarUDF {
    ScalarUDF::from(DateFormat {
        signature: Signature::any(2, Volatility::Immutable),
    })
}

#[cfg(test)]
mod tests {
    use super::java_to_strftime;

    #[test]
    fn flink_patterns_become_strftime() {
        assert_eq!(java_to_strftime("yyyy-MM-dd").unwrap(), "%Y-%m-%d");
        assert_eq!(
            java_to_strftime("yyyy-MM-dd HH:mm:ss.SSS").unwrap(),
            "%Y-%m-%d %H:%M:%S.%3f"
        );
        assert_eq!(
            java_to_strftime("yyyy-MM-dd'T'HH:mm").unwrap(),
            "%Y-%m-%dT%H:%M"
        );
        assert_eq!(java_to_strftime("EEE, d MMM yy").unwrap(), "%a, %-d %b %y");
        assert_eq!(java_to_strftime("'100%' HH").unwrap(), "100%% %H");
        assert_eq!(
            java_to_strftime("hh 'o''clock' a").unwrap(),
            "%I o'clock %p"
        );
    }

    #[test]
    fn unknown_pattern_letters_are_refused_by_name() {
        let e = java_to_strftime("yyyy-ww").unwrap_err();
        assert!(e.contains("`ww`"), "{e}");
        assert!(java_to_strftime("'open")
            .unwrap_err()
            .contains("never closed"));
    }
}
