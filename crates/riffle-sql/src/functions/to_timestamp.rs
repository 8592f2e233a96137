//! `TO_TIMESTAMP(text[, 'pattern'])`: Flink's parse of a date-time string with a Java
//! pattern (by default `yyyy-MM-dd HH:mm:ss`, fractional seconds allowed), in UTC (the
//! session time zone riffle runs in), to a `TIMESTAMP(3)`; NULL when the text does not
//! match, as in Flink. DataFusion's `to_timestamp` takes strftime patterns and reads
//! integers as seconds; riffle replaces it. A date-only pattern gives midnight.

use super::date_format::java_to_strftime;
use chrono::{NaiveDate, NaiveDateTime};
use datafusion::arrow::array::{Array, AsArray, TimestampMillisecondBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, TimeUnit};
use datafusion::common::{exec_err, plan_err, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use std::sync::Arc;

/// Milliseconds since the epoch of `text` read with the strftime `format`, or `None`.
pub fn parse_millis(text: &str, format: &str) -> Option<i64> {
    let text = text.trim();
    NaiveDateTime::parse_from_str(text, format)
        .ok()
        .or_else(|| {
            NaiveDate::parse_from_str(text, format)
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })
        .map(|t| t.and_utc().timestamp_millis())
}

/// Flink's default: seconds, with or without a fraction.
const DEFAULT_FORMATS: [&str; 2] = ["%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M:%S%.f"];

#[derive(Debug, PartialEq, Eq, Hash)]
struct ToTimestamp {
    signature: Signature,
}

impl ToTimestamp {
    /// The strftime formats to try for the pattern argument (absent: the default).
    fn formats(value: Option<Option<&ScalarValue>>) -> datafusion::common::Result<Vec<String>> {
        match value {
            None => Ok(DEFAULT_FORMATS.iter().map(|f| f.to_string()).collect()),
            Some(v) => {
                let Some(p) = super::string_literal(v) else {
                    return plan_err!(
                        "TO_TIMESTAMP takes its pattern as a string literal, e.g. TO_TIMESTAMP(s, 'yyyy-MM-dd HH:mm')"
                    );
                };
                java_to_strftime(p)
                    .map(|f| vec![f])
                    .or_else(|e| plan_err!("TO_TIMESTAMP pattern '{p}': {e}"))
            }
        }
    }
}

impl ScalarUDFImpl for ToTimestamp {
    fn name(&self) -> &str {
        "to_timestamp"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(DataType::Timestamp(TimeUnit::Millisecond, None))
    }

    fn return_field_from_args(
        &self,
        args: ReturnFieldArgs,
    ) -> datafusion::common::Result<FieldRef> {
        let text = super::is_text;
        match args.arg_fields {
            [s] if text(s.data_type()) => {}
            [s, p] if text(s.data_type()) && text(p.data_type()) => {
                Self::formats(Some(args.scalar_arguments[1]))?;
            }
            _ => {
                return plan_err!(
                    "TO_TIMESTAMP takes a string and optionally a pattern: TO_TIMESTAMP(s) or TO_TIMESTAMP(s, 'yyyy-MM-dd HH:mm'); for epoch milliseconds use to_timestamp_millis(ms)"
                )
            }
        }
        Ok(Arc::new(Field::new(
            self.name(),
            self.return_type(&[])?,
            true,
        )))
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        let formats = match args.args.as_slice() {
            [_] => Self::formats(None)?,
            [_, ColumnarValue::Scalar(p)] => Self::formats(Some(Some(p)))?,
            _ => return exec_err!("TO_TIMESTAMP takes a string and a literal pattern"),
        };
        let text = cast(&args.args[0].to_array(args.number_rows)?, &DataType::Utf8)?;
        let text = text.as_string::<i32>();
        let mut out = TimestampMillisecondBuilder::with_capacity(text.len());
        for i in 0..text.len() {
            let parsed = (!text.is_null(i))
                .then(|| formats.iter().find_map(|f| parse_millis(text.value(i), f)))
                .flatten();
            out.append_option(parsed);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// `to_timestamp` with Flink's patterns and NULL on a mismatch, to register with the
/// planner (it replaces DataFusion's function of that name).
pub fn to_timestamp_udf() -> ScalarUDF {
    ScalarUDF::from(ToTimestamp {
        signature: Signature::variadic_any(Volatility::Immutable),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn millis(text: &str, java: Option<&str>) -> Option<i64> {
        let formats = match java {
            None => DEFAULT_FORMATS.iter().map(|f| f.to_string()).collect(),
            Some(p) => vec![java_to_strftime(p).unwrap()],
        };
        formats.iter().find_map(|f| parse_millis(text, f))
    }

    #[test]
    fn flinks_default_pattern_and_its_documented_values() {
        // Flink's documentation: TO_TIMESTAMP('1970-01-01 00:00:00') is the epoch.
        assert_eq!(millis("1970-01-01 00:00:00", None), Some(0));
        assert_eq!(
            millis("2023-11-14 23:59:30.250", None),
            Some(1_700_006_370_250)
        );
        // Not the default pattern: NULL, as in Flink.
        assert_eq!(millis("2023-11-14T23:59:30", None), None);
        assert_eq!(millis("not a time", None), None);
    }

    #[test]
    fn java_patterns_parse_and_a_date_is_midnight() {
        assert_eq!(
            millis("14/11/2023 23:59", Some("dd/MM/yyyy HH:mm")),
            Some(1_700_006_340_000)
        );
        assert_eq!(
            millis("2023-11-14", Some("yyyy-MM-dd")),
            Some(1_699_920_000_000)
        );
        assert_eq!(millis("2023-11-14", Some("yyyy-MM-dd HH:mm")), None);
    }
}
