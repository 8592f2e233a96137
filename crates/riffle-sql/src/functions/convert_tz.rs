//! `CONVERT_TZ(text, from_zone, to_zone)`: Flink's reading of a date-time text
//! `yyyy-MM-dd HH:mm:ss` as a local time in one zone, written as the same instant's local
//! time in another. As Flink 2.3 answers (checked with PyFlink):
//! - a local time in a daylight-saving gap is read with the offset before the gap, an
//!   ambiguous one with the later (standard) offset;
//! - text after the seconds (a fraction) is ignored; a text with no time after the date
//!   (`2025-06-01`, `2025-06-01T12:00:00`) gives NULL.
//!
//! Where riffle refuses instead: a zone that is neither an IANA name nor `GMT±hh[:mm]`
//! (Flink reads `+08:00`, `PST`'s siblings it does not know and typing errors as GMT,
//! silently), zones that are not string literals, and a time Java's lenient parser would
//! read but is not the zero-padded form (`2025-6-1 1:2:3`), which fails the query naming
//! the value.

use chrono::{DateTime, Duration, FixedOffset, LocalResult, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;
use datafusion::arrow::array::{ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{exec_err, plan_err, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use std::str::FromStr;
use std::sync::Arc;

/// A zone CONVERT_TZ reads or writes in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Zone {
    Named(Tz),
    Fixed(FixedOffset),
}

impl Zone {
    /// An IANA name (`America/Los_Angeles`, `UTC`) or a `GMT+hh:mm` offset.
    ///
    /// # Errors
    /// Any other text, with what to write instead.
    pub fn parse(name: &str) -> std::result::Result<Self, String> {
        if let Some(offset) = gmt_offset(name) {
            return Ok(Zone::Fixed(offset));
        }
        Tz::from_str(name).map(Zone::Named).map_err(|_| {
            format!(
                "unknown time zone '{name}': write an IANA name such as 'America/Los_Angeles' \
                 or 'UTC', or an offset as 'GMT+08:00' (Flink reads an unknown zone as GMT \
                 without an error)"
            )
        })
    }

    /// The instant of local time `local` in this zone, as Flink resolves gaps and overlaps.
    fn instant(self, local: NaiveDateTime) -> Option<DateTime<Utc>> {
        match self {
            Zone::Fixed(offset) => offset
                .from_local_datetime(&local)
                .single()
                .map(|t| t.with_timezone(&Utc)),
            Zone::Named(tz) => match tz.from_local_datetime(&local) {
                LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
                // The later of the two instants: the standard offset.
                LocalResult::Ambiguous(_, later) => Some(later.with_timezone(&Utc)),
                LocalResult::None => {
                    // In a gap: the offset in effect before it (a day earlier, as no
                    // zone changes its offset twice within a day).
                    let before = local.checked_sub_signed(Duration::days(1))?;
                    let offset = tz.offset_from_utc_datetime(&before).fix();
                    let utc = local
                        .checked_sub_signed(Duration::seconds(offset.local_minus_utc().into()))?;
                    Some(Utc.from_utc_datetime(&utc))
                }
            },
        }
    }

    /// The local time of `instant` in this zone.
    fn local(self, instant: DateTime<Utc>) -> NaiveDateTime {
        match self {
            Zone::Fixed(offset) => instant.with_timezone(&offset).naive_local(),
            Zone::Named(tz) => instant.with_timezone(&tz).naive_local(),
        }
    }
}

/// `GMT+h`, `GMT+hh`, `GMT+hh:mm` or `GMT+hhmm` (either sign), as Java's custom zone IDs.
fn gmt_offset(name: &str) -> Option<FixedOffset> {
    let rest = name.strip_prefix("GMT")?;
    let sign = match rest.chars().next()? {
        '+' => 1,
        '-' => -1,
        _ => return None,
    };
    let digits = &rest[1..];
    let (hours, minutes) = match digits.split_once(':') {
        Some((h, m)) if m.len() == 2 => (h, m),
        Some(_) => return None,
        None if digits.len() == 4 => digits.split_at(2),
        None => (digits, "00"),
    };
    if hours.is_empty()
        || hours.len() > 2
        || !hours
            .bytes()
            .chain(minutes.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let (h, m): (i32, i32) = (hours.parse().ok()?, minutes.parse().ok()?);
    if h > 23 || m > 59 {
        return None;
    }
    FixedOffset::east_opt(sign * (h * 3600 + m * 60))
}

/// What a date-time text reads as.
#[derive(Debug, PartialEq)]
pub enum Reading {
    Time(NaiveDateTime),
    /// Flink gives NULL: no time after the date.
    Null,
    /// Not the zero-padded form, which Java's lenient parser might still read.
    Unsupported,
}

/// Reads `yyyy-MM-dd HH:mm:ss` at the start of `text`; what follows is ignored.
pub fn read_local(text: &str) -> Reading {
    let prefix = text.get(..19).filter(|d| d.as_bytes()[10] == b' ');
    let Some(date_time) = prefix else {
        // Java's parse fails without a space before the time: Flink's NULL. Any other
        // text with a space may be one its lenient parser reads.
        return if text.contains(' ') {
            Reading::Unsupported
        } else {
            Reading::Null
        };
    };
    match NaiveDateTime::parse_from_str(date_time, "%Y-%m-%d %H:%M:%S") {
        Ok(t) if date_time.bytes().take(4).all(|b| b.is_ascii_digit()) => Reading::Time(t),
        _ => Reading::Unsupported,
    }
}

/// `text` read in `from`, written in `to`; `Ok(None)` where Flink gives NULL.
///
/// # Errors
/// A text riffle does not read (see [`Reading::Unsupported`]).
pub fn convert(text: &str, from: Zone, to: Zone) -> std::result::Result<Option<String>, String> {
    match read_local(text) {
        Reading::Time(local) => Ok(from
            .instant(local)
            .map(|instant| to.local(instant).format("%Y-%m-%d %H:%M:%S").to_string())),
        Reading::Null => Ok(None),
        Reading::Unsupported => Err(format!(
            "CONVERT_TZ reads 'yyyy-MM-dd HH:mm:ss' with zero-padded fields, not '{text}'"
        )),
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct ConvertTz {
    signature: Signature,
}

impl ConvertTz {
    fn zone(value: Option<&ScalarValue>, which: &str) -> Result<Zone> {
        let Some(name) = super::string_literal(value) else {
            return plan_err!(
                "CONVERT_TZ takes its {which} zone as a string literal, e.g. 'America/Los_Angeles'"
            );
        };
        Zone::parse(name).or_else(|e| plan_err!("CONVERT_TZ: {e}"))
    }
}

impl ScalarUDFImpl for ConvertTz {
    fn name(&self) -> &str {
        "convert_tz"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let [text, _, _] = args.arg_fields else {
            return plan_err!("CONVERT_TZ takes a date-time text and two zones");
        };
        if !super::is_text(text.data_type()) {
            return plan_err!(
                "CONVERT_TZ converts a date-time text ('yyyy-MM-dd HH:mm:ss'), not {}; \
                 format a timestamp with DATE_FORMAT first",
                text.data_type()
            );
        }
        let scalar = |i: usize| args.scalar_arguments.get(i).copied().flatten();
        Self::zone(scalar(1), "first")?;
        Self::zone(scalar(2), "second")?;
        Ok(Arc::new(Field::new(self.name(), DataType::Utf8, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let [text, ColumnarValue::Scalar(from), ColumnarValue::Scalar(to)] = args.args.as_slice()
        else {
            return exec_err!("CONVERT_TZ takes its zones as string literals");
        };
        let (from, to) = (
            Self::zone(Some(from), "first")?,
            Self::zone(Some(to), "second")?,
        );
        let text: ArrayRef = cast(&text.to_array(n)?, &DataType::Utf8)?;
        let text = text.as_string::<i32>();
        let mut out = StringBuilder::with_capacity(n, n * 19);
        for value in text.iter() {
            match value.map(|t| convert(t, from, to)) {
                None => out.append_null(),
                Some(Ok(converted)) => out.append_option(converted),
                Some(Err(e)) => return exec_err!("{e}"),
            }
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// `convert_tz`, to register with the planner.
pub fn convert_tz_udf() -> ScalarUDF {
    ScalarUDF::from(ConvertTz {
        signature: Signature::any(3, Volatility::Immutable),
    })
}

#[cfg(test)]
mod tests {
    use super::{convert, read_local, Reading, Zone};

    fn zone(name: &str) -> Zone {
        Zone::parse(name).unwrap()
    }

    fn flink(text: &str, from: &str, to: &str) -> Option<String> {
        convert(text, zone(from), zone(to)).unwrap()
    }

    #[test]
    fn answers_recorded_from_flink() {
        // Flink 2.3 (PyFlink, batch mode): each call and its answer.
        let los_angeles = "America/Los_Angeles";
        assert_eq!(
            flink("1970-01-01 00:00:00", "UTC", los_angeles).as_deref(),
            Some("1969-12-31 16:00:00")
        );
        // The spring gap: read with the standard offset from before it.
        assert_eq!(
            flink("2025-03-09 02:30:00", los_angeles, "UTC").as_deref(),
            Some("2025-03-09 10:30:00")
        );
        // The autumn overlap: the later instant (standard offset).
        assert_eq!(
            flink("2025-11-02 01:30:00", los_angeles, "UTC").as_deref(),
            Some("2025-11-02 09:30:00")
        );
        // A fraction is ignored; no time after the date is NULL.
        assert_eq!(
            flink("2025-06-01 12:00:00.789", "UTC", "UTC").as_deref(),
            Some("2025-06-01 12:00:00")
        );
        assert_eq!(flink("2025-06-01T12:00:00", "UTC", los_angeles), None);
        assert_eq!(flink("2025-06-01", "UTC", los_angeles), None);
    }

    #[test]
    fn gmt_offsets_are_custom_zones() {
        assert_eq!(
            flink("2025-06-01 12:00:00", "UTC", "GMT+08:00").as_deref(),
            Some("2025-06-01 20:00:00")
        );
        assert_eq!(
            flink("2025-06-01 12:00:00", "GMT-05:30", "UTC").as_deref(),
            Some("2025-06-01 17:30:00")
        );
        assert_eq!(zone("GMT+8"), zone("GMT+0800"));
    }

    #[test]
    fn zones_flink_reads_as_gmt_silently_are_refused() {
        for name in [
            "+08:00",
            "PST",
            "america/los_angeles",
            "Mars/Olympus",
            "GMT+25:00",
        ] {
            let e = Zone::parse(name).unwrap_err();
            assert!(e.contains(name) && e.contains("IANA"), "{e}");
        }
    }

    #[test]
    fn the_function_converts_a_column_and_keeps_nulls() {
        use datafusion::arrow::array::{Array, AsArray, StringArray};
        use datafusion::arrow::datatypes::{DataType, Field};
        use datafusion::common::ScalarValue;
        use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs};
        use std::sync::Arc;
        let text = StringArray::from(vec![
            Some("2025-01-15 08:00:00"),
            None,
            Some("2025-07-15 08:00:00"),
        ]);
        let zone = |z: &str| ColumnarValue::Scalar(ScalarValue::Utf8(Some(z.into())));
        let field = |n: &str| Arc::new(Field::new(n, DataType::Utf8, true));
        let out = super::convert_tz_udf()
            .invoke_with_args(ScalarFunctionArgs {
                args: vec![
                    ColumnarValue::Array(Arc::new(text)),
                    zone("UTC"),
                    zone("Europe/Berlin"),
                ],
                arg_fields: vec![field("t"), field("f"), field("z")],
                number_rows: 3,
                return_field: field("r"),
                config_options: Arc::new(datafusion::config::ConfigOptions::default()),
            })
            .unwrap();
        let ColumnarValue::Array(out) = out else {
            panic!("{out:?}")
        };
        let out = out.as_string::<i32>();
        assert_eq!(out.value(0), "2025-01-15 09:00:00", "winter: +01:00");
        assert!(out.is_null(1));
        assert_eq!(out.value(2), "2025-07-15 10:00:00", "summer: +02:00");
    }

    #[test]
    fn a_form_only_java_leniency_reads_is_an_error_not_a_null() {
        assert_eq!(read_local("2025-6-1 1:2:3"), Reading::Unsupported);
        assert_eq!(read_local("2025-13-01 00:00:00"), Reading::Unsupported);
        assert!(convert("2025-6-1 1:2:3", zone("UTC"), zone("UTC"))
            .unwrap_err()
            .contains("2025-6-1 1:2:3"));
    }
}
