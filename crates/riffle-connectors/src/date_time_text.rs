//! The common shape of a date-time in text records, `2025-01-31T12:00:00.123`, read
//! without going through a general parser.
//!
//! Arrow's string-to-timestamp cast accepts all of RFC 3339 and ISO 8601 and resolves
//! a time zone for every value; on JSON lines of Nexmark bids that was a tenth of the
//! reader's time. Most exports write one plain form, so [`parse_plain`] reads exactly
//! that form and says `None` for anything else; the caller then casts the whole column
//! with Arrow as before. A differential test keeps the two equal wherever the plain
//! form applies. [`timestamp_from_text`] reads a text record's TIMESTAMP column so.

use crate::json_check::is_signed_digits;
use crate::time_columns::{epoch_millis_as, retyped};
use riffle_core::arrow::array::{Array, ArrayRef, AsArray, Int64Array, StringArray};
use riffle_core::arrow::compute::is_not_null;
use riffle_core::arrow::compute::kernels::cast::{cast_with_options, CastOptions};
use riffle_core::arrow::compute::kernels::zip::zip;
use riffle_core::arrow::datatypes::{DataType, Field, TimeUnit};
use std::sync::Arc;

/// `text` as a count of `unit` since the Unix epoch, when it is
/// `YYYY-MM-DD`, then `T` or a space, then `hh:mm:ss`, then optionally `.` and one to
/// nine digits, then optionally `Z`: a valid date and time of day, read as UTC.
/// Extra fraction digits beyond the unit are cut off, as Arrow does. `None` for any
/// other text (an offset, a leap second, a short year), and on overflow.
pub(crate) fn parse_plain(text: &[u8], unit: TimeUnit) -> Option<i64> {
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        part.iter().try_fold(0i64, |n, &b| {
            b.is_ascii_digit().then(|| n * 10 + i64::from(b - b'0'))
        })
    };
    let at = |i: usize, expected: &[u8]| text.get(i).is_some_and(|b| expected.contains(b));
    if text.len() < 19 || !at(4, b"-") || !at(7, b"-") || !at(10, b"T ") {
        return None;
    }
    if !at(13, b":") || !at(16, b":") {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (hour, minute, second) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut rest = &text[19..];
    let mut nanos = 0i64;
    if let Some(fraction) = rest.strip_prefix(b".") {
        let count = fraction.iter().take_while(|b| b.is_ascii_digit()).count();
        if count == 0 || count > 9 {
            return None;
        }
        nanos = digits(20..20 + count)? * 10i64.pow(9 - count as u32);
        rest = &fraction[count..];
    }
    if !(rest.is_empty() || rest == b"Z") {
        return None;
    }
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    let (per_second, nanos_per_tick) = match unit {
        TimeUnit::Second => (1, 1_000_000_000),
        TimeUnit::Millisecond => (1_000, 1_000_000),
        TimeUnit::Microsecond => (1_000_000, 1_000),
        TimeUnit::Nanosecond => (1_000_000_000, 1),
    };
    seconds
        .checked_mul(per_second)?
        .checked_add(nanos / nanos_per_tick)
}

/// A text column as the timestamp type `target` through [`parse_plain`], when `target`
/// is UTC (no zone, or `UTC`) and every value has the plain form; `None` otherwise.
pub(crate) fn plain_column(text: &StringArray, target: &DataType) -> Option<ArrayRef> {
    let DataType::Timestamp(unit, zone) = target else {
        return None;
    };
    if zone.as_deref().is_some_and(|z| z != "UTC") {
        return None;
    }
    let values = (0..text.len())
        .map(|i| match text.is_valid(i) {
            true => parse_plain(text.value(i).as_bytes(), *unit).map(Some),
            false => Some(None),
        })
        .collect::<Option<Vec<Option<i64>>>>()?;
    let values: ArrayRef = Arc::new(Int64Array::from(values));
    retyped(values, target).ok()
}

/// A text column as the TIMESTAMP `field`: each value epoch milliseconds when it is an
/// integer, else a date-time; the error names the field and the value.
pub(crate) fn timestamp_from_text(
    column: &ArrayRef,
    field: &Field,
) -> std::result::Result<ArrayRef, String> {
    let safe = CastOptions {
        safe: true,
        ..Default::default()
    };
    let target = field.data_type();
    let text = column.as_string::<i32>();
    let as_text = || match crate::date_time_text::plain_column(text, target) {
        Some(values) => Ok(values),
        None => cast_with_options(column, target, &safe).map_err(|e| e.to_string()),
    };
    let as_millis = || {
        let millis =
            cast_with_options(column, &DataType::Int64, &safe).map_err(|e| e.to_string())?;
        // (A value past the column unit's range becomes NULL, reported below.)
        let from_millis = epoch_millis_as(&millis, target).map_err(|e| e.to_string())?;
        Ok::<_, String>((millis, from_millis))
    };
    let each_as_either = || {
        let (millis, from_millis) = as_millis()?;
        let is_millis = is_not_null(&millis).map_err(|e| e.to_string())?;
        zip(&is_millis, &from_millis, &as_text()?).map_err(|e| e.to_string())
    };
    // Most files hold one kind: then each value is parsed once, not as both kinds.
    let integers = text
        .iter()
        .flatten()
        .filter(|v| is_signed_digits(v))
        .count();
    let all_read = |values: &ArrayRef| values.null_count() == column.null_count();
    let values = if integers == 0 {
        Some(as_text()?).filter(all_read)
    } else if integers == column.len() - column.null_count() {
        Some(as_millis()?.1).filter(all_read)
    } else {
        None
    };
    let values = match values {
        Some(values) => values,
        None => each_as_either()?,
    };
    if let Some(bad) = (0..column.len()).find(|i| column.is_valid(*i) && values.is_null(*i)) {
        let value = text.value(bad);
        return Err(match is_time_out_of_range(value, target) {
            true => format!(
                "field '{}': `{value}` is outside the range of TIMESTAMP, {}",
                field.name(),
                timestamp_range(target)
            ),
            false => format!(
                "field '{}': `{value}` is neither epoch milliseconds nor a date-time (e.g. 2025-01-31T12:00:00Z)",
                field.name()
            ),
        });
    }
    Ok(values)
}

/// Whether `value`, which the timestamp type `target` could not hold, is a time (epoch
/// milliseconds, or a date-time read in seconds) past that type's range.
fn is_time_out_of_range(value: &str, target: &DataType) -> bool {
    if is_signed_digits(value) {
        return value.parse::<i64>().is_ok();
    }
    let DataType::Timestamp(_, zone) = target else {
        return false;
    };
    let in_seconds = DataType::Timestamp(TimeUnit::Second, zone.clone());
    let column: ArrayRef = Arc::new(StringArray::from(vec![value]));
    cast_with_options(&column, &in_seconds, &CastOptions::default()).is_ok_and(|c| c.is_valid(0))
}

/// The range of the timestamp type `target`, in words.
fn timestamp_range(target: &DataType) -> &'static str {
    match target {
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            "1677-09-21 00:12:43.145224192 to 2262-04-11 23:47:16.854775807 (riffle keeps nanoseconds)"
        }
        _ => "the range of the column's unit",
    }
}

fn is_leap_year(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the proleptic Gregorian date (the usual era arithmetic:
/// 400-year eras of 146 097 days, years starting in March so that the leap day is last).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::AsArray;
    use riffle_core::arrow::compute::kernels::cast::{cast_with_options, CastOptions};
    use riffle_core::arrow::datatypes::{Int64Type, TimestampMillisecondType};

    /// Arrow's answer for `text` as `target`, as an i64 (`None`: not a time).
    fn arrow(text: &str, target: &DataType) -> Option<i64> {
        let column: ArrayRef = Arc::new(StringArray::from(vec![text]));
        let safe = CastOptions {
            safe: true,
            ..Default::default()
        };
        let cast = cast_with_options(&column, target, &safe).ok()?;
        let ints = cast_with_options(&cast, &DataType::Int64, &safe).ok()?;
        let ints = ints.as_primitive::<Int64Type>();
        ints.is_valid(0).then(|| ints.value(0))
    }

    fn units() -> [TimeUnit; 4] {
        [
            TimeUnit::Second,
            TimeUnit::Millisecond,
            TimeUnit::Microsecond,
            TimeUnit::Nanosecond,
        ]
    }

    #[test]
    fn the_plain_form_reads_as_arrow_reads_it() {
        // A small deterministic generator: dates over four centuries around the epoch
        // (leap days, month ends, before 1970), every fraction length, both separators.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for _ in 0..20_000 {
            let year = 1800 + next(400);
            let month = 1 + next(12);
            let day = 1 + next(31);
            let separator = if next(2) == 0 { 'T' } else { ' ' };
            let fraction = match next(11) {
                0 => String::new(),
                n => format!(".{:0width$}", next(10u64.pow(n as u32)), width = n as usize),
            };
            let zulu = if next(3) == 0 { "Z" } else { "" };
            let text = format!(
                "{year:04}-{month:02}-{day:02}{separator}{:02}:{:02}:{:02}{fraction}{zulu}",
                next(24),
                next(60),
                next(60)
            );
            for unit in units() {
                for zone in [None, Some("UTC".into())] {
                    let target = DataType::Timestamp(unit, zone);
                    let ours = parse_plain(text.as_bytes(), unit);
                    let theirs = arrow(&text, &target);
                    // Ours may decline what Arrow reads (then Arrow reads it), but
                    // whatever ours reads, Arrow reads the same.
                    if ours.is_some() || fraction.len() <= 10 {
                        assert_eq!(ours, theirs, "{text} as {target}");
                    }
                }
            }
        }
    }

    #[test]
    fn other_forms_are_left_to_arrow() {
        for text in [
            "2025-01-31T12:00:00+01:00",
            "2025-01-31",
            "2025-1-31T12:00:00",
            "2025-01-31T12:00",
            "2025-01-31T12:00:60",
            "2025-02-30T12:00:00",
            "2025-01-31T12:00:00.",
            "2025-01-31T12:00:00.1234567891",
            "2025-01-31t12:00:00",
            "+2025-01-31T12:00:00",
            "2025-01-31T12:00:00 ",
            "1700000000000",
        ] {
            assert_eq!(
                parse_plain(text.as_bytes(), TimeUnit::Millisecond),
                None,
                "{text}"
            );
        }
    }

    #[test]
    fn a_column_takes_the_plain_path_only_whole_and_only_in_utc() {
        let plain = StringArray::from(vec![Some("2025-01-01T00:00:01.5"), None]);
        let target = DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
        let column = plain_column(&plain, &target).expect("plain");
        assert_eq!(column.data_type(), &target);
        let values = column.as_primitive::<TimestampMillisecondType>();
        assert_eq!(values.value(0), 1_735_689_601_500);
        assert!(values.is_null(1));

        let mixed = StringArray::from(vec!["2025-01-01T00:00:01", "2025-01-01T01:00:00+01:00"]);
        assert!(plain_column(&mixed, &target).is_none());
        let elsewhere = DataType::Timestamp(TimeUnit::Millisecond, Some("+08:00".into()));
        assert!(plain_column(&plain, &elsewhere).is_none());
    }

    #[test]
    fn past_the_units_range_is_left_to_arrow() {
        assert_eq!(
            parse_plain(b"9999-12-31T23:59:59", TimeUnit::Nanosecond),
            None
        );
        assert_eq!(
            parse_plain(b"9999-12-31T23:59:59", TimeUnit::Second),
            Some(253_402_300_799)
        );
    }
}
