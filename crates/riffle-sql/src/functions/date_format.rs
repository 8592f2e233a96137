//! `DATE_FORMAT(ts, 'yyyy-MM-dd HH:mm:ss')` with Flink's (Java `SimpleDateFormat`)
//! pattern letters. DataFusion's own `date_format` is `to_char` with strftime patterns,
//! under which a Java pattern has no `%` and comes back as the same text on every row;
//! riffle replaces it. The pattern is translated to strftime at planning time, and a
//! letter riffle does not know is refused there, naming it.

use chrono::format::{Item, StrftimeItems};
use chrono::{DateTime, NaiveDateTime};
use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::datatypes::{
    DataType, Field, FieldRef, TimeUnit, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
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
        let formatted = match format_utc_timestamps(&array, &format) {
            Some(formatted) => formatted,
            None => format_any(&array, &format)?,
        };
        Ok(ColumnarValue::Array(formatted))
    }
}

/// Any timestamp or date, through Arrow's display of temporal values.
fn format_any(array: &ArrayRef, format: &str) -> datafusion::common::Result<ArrayRef> {
    let options = FormatOptions::new()
        .with_timestamp_format(Some(format))
        .with_timestamp_tz_format(Some(format))
        .with_date_format(Some(format));
    let formatter = ArrayFormatter::try_new(array.as_ref(), &options)?;
    let mut out = StringBuilder::with_capacity(array.len(), array.len() * format.len());
    for i in 0..array.len() {
        if array.is_null(i) {
            out.append_null();
        } else {
            out.append_value(formatter.value(i).to_string());
        }
    }
    Ok(Arc::new(out.finish()))
}

/// The span of time, in seconds, within which every value formats the same under
/// `items` (UTC days, hours and minutes begin at multiples of theirs since the epoch):
/// a day for `yyyy-MM-dd`, a minute for `HH:mm`. `None` when the items show fractions
/// of a second, or anything else.
fn same_text_span(items: &[Item<'_>]) -> Option<i64> {
    use chrono::format::{Fixed, Numeric as N};
    const DAY: i64 = 86_400;
    let mut span = DAY;
    for item in items {
        let of_item = match item {
            Item::Literal(_) | Item::OwnedLiteral(_) | Item::Space(_) | Item::OwnedSpace(_) => {
                continue
            }
            Item::Numeric(numeric, _) => match numeric {
                N::Year
                | N::YearDiv100
                | N::YearMod100
                | N::IsoYear
                | N::IsoYearDiv100
                | N::IsoYearMod100
                | N::Quarter
                | N::Month
                | N::Day
                | N::WeekFromSun
                | N::WeekFromMon
                | N::IsoWeek
                | N::NumDaysFromSun
                | N::WeekdayFromMon
                | N::Ordinal => DAY,
                N::Hour | N::Hour12 => 3_600,
                N::Minute => 60,
                N::Second | N::Timestamp => 1,
                _ => return None,
            },
            Item::Fixed(fixed) => match fixed {
                Fixed::ShortMonthName
                | Fixed::LongMonthName
                | Fixed::ShortWeekdayName
                | Fixed::LongWeekdayName => DAY,
                Fixed::LowerAmPm | Fixed::UpperAmPm => 3_600,
                _ => return None,
            },
            _ => return None,
        };
        span = span.min(of_item);
    }
    Some(span)
}

/// Timestamps without a zone or in UTC (riffle reads a time without a zone as UTC),
/// formatted with the strftime items parsed once: Arrow's formatter parses the format
/// again for every value, which was most of the function's time. A value in the same
/// [`same_text_span`] as the one before reuses its text (a batch of event times mostly
/// shares its day and minute). `None` for other types and zones, and for a format
/// chrono does not parse (the general path reports it).
fn format_utc_timestamps(array: &ArrayRef, format: &str) -> Option<ArrayRef> {
    let DataType::Timestamp(unit, zone) = array.data_type() else {
        return None;
    };
    if zone.as_deref().is_some_and(|z| z != "UTC" && z != "+00:00") {
        return None;
    }
    let items = StrftimeItems::new(format).parse_to_owned().ok()?;
    let values = match unit {
        TimeUnit::Second => array.as_primitive::<TimestampSecondType>().values(),
        TimeUnit::Millisecond => array.as_primitive::<TimestampMillisecondType>().values(),
        TimeUnit::Microsecond => array.as_primitive::<TimestampMicrosecondType>().values(),
        TimeUnit::Nanosecond => array.as_primitive::<TimestampNanosecondType>().values(),
    };
    let per_second = units_per_second(*unit);
    let to_time = |v: i64| -> Option<NaiveDateTime> {
        let nanos = v.rem_euclid(per_second) * (1_000_000_000 / per_second);
        DateTime::from_timestamp(v.div_euclid(per_second), u32::try_from(nanos).ok()?)
            .map(|t| t.naive_utc())
    };
    let span = same_text_span(&items).map(|s| s * per_second);
    // The span the last formatted value lies in, and its text.
    let mut last: Option<(i64, String)> = None;
    let mut out = StringBuilder::with_capacity(array.len(), array.len() * format.len());
    for (i, &v) in values.iter().enumerate() {
        if array.is_null(i) {
            out.append_null();
            continue;
        }
        let key = span.map(|s| v.div_euclid(s));
        if let (Some(key), Some((last_key, text))) = (key, &last) {
            if key == *last_key {
                out.append_value(text);
                continue;
            }
        }
        // A value chrono cannot represent: the general path reports it.
        let time = to_time(v)?;
        let text = time.format_with_items(items.iter()).to_string();
        out.append_value(&text);
        last = key.map(|key| (key, text));
    }
    Some(Arc::new(out.finish()))
}

/// How many of `unit` make a second.
fn units_per_second(unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
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
    use super::{format_any, format_utc_timestamps, java_to_strftime};
    use datafusion::arrow::array::{
        ArrayRef, TimestampMicrosecondArray, TimestampMillisecondArray, TimestampNanosecondArray,
        TimestampSecondArray,
    };
    use std::sync::Arc;

    #[test]
    fn formatting_with_parsed_items_equals_arrows_display() {
        // Times from 1900 to 2100 (negative ones too), with fractions, and a NULL.
        let mut state = 7u64;
        let mut seconds: Vec<Option<i64>> = (0..2000)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                Some((state >> 11) as i64 % 6_311_390_400 - 2_208_988_800)
            })
            .collect();
        // Runs of near values across midnights, hours and minutes (before 1970 too), so
        // that values share a span with the one before.
        for midnight in [-5 * 86_400, 0, 19_000 * 86_400] {
            for offset in [
                -61, -60, -59, -1, 0, 1, 59, 60, 3_599, 3_600, 3_601, 43_199, 43_200,
            ] {
                seconds.push(Some(midnight + offset));
                seconds.push(Some(midnight + offset));
            }
        }
        seconds.push(None);
        let scaled = |factor: i64, extra: i64| -> Vec<Option<i64>> {
            seconds
                .iter()
                .map(|s| s.map(|s| s * factor + extra))
                .collect()
        };
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(TimestampSecondArray::from(seconds.clone())),
            Arc::new(TimestampMillisecondArray::from(scaled(1_000, 123))),
            Arc::new(
                TimestampMicrosecondArray::from(scaled(1_000_000, 456_789)).with_timezone("UTC"),
            ),
            Arc::new(TimestampNanosecondArray::from(scaled(
                1_000_000_000,
                987_654_321,
            ))),
        ];
        for pattern in [
            "yyyy-MM-dd",
            "HH:mm",
            "yyyy-MM-dd HH:mm:ss.SSS",
            "EEE, d MMM yy",
            "hh 'o''clock' a",
            "EEEE HH:mm:ss",
            "yyyy-MM-dd HH",
        ] {
            let format = java_to_strftime(pattern).unwrap();
            for array in &arrays {
                let fast = format_utc_timestamps(array, &format).expect("a UTC timestamp");
                let general = format_any(array, &format).unwrap();
                assert_eq!(&fast, &general, "{pattern} over {}", array.data_type());
            }
        }
        let zoned: ArrayRef = Arc::new(TimestampSecondArray::from(vec![0]).with_timezone("+08:00"));
        assert!(
            format_utc_timestamps(&zoned, "%H").is_none(),
            "another zone: the general path"
        );
    }

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
