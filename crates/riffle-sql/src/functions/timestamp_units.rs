//! Flink's `TIMESTAMPADD(unit, n, t)` and `TIMESTAMPDIFF(unit, t1, t2)` with `unit` one
//! of SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, QUARTER, YEAR, in UTC (the session time
//! zone riffle runs in). The SQL rewrite (`super::flink_spelling`) passes the unit as a
//! string literal to `riffle_timestampadd` / `riffle_timestampdiff`.
//!
//! Months are calendar months: adding one to January 31 gives the last day of
//! February. Other units count whole units toward zero; months are counted as Flink
//! counts them (see [`months_between`]). Expected values in the tests come from
//! Flink 2.3 itself (PyFlink, batch mode, local time zone UTC).

use chrono::{Months, NaiveDate, NaiveDateTime, TimeDelta};
use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int32Builder, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, TimeUnit};
use datafusion::common::{exec_err, plan_err, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use std::sync::Arc;

/// A unit of `TIMESTAMPADD` / `TIMESTAMPDIFF`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

/// The units' names, as Flink spells them.
pub(crate) const UNITS: &str = "SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, QUARTER or YEAR";

impl Unit {
    pub(crate) fn parse(name: &str) -> Option<Unit> {
        Some(match name.to_ascii_uppercase().as_str() {
            "SECOND" => Unit::Second,
            "MINUTE" => Unit::Minute,
            "HOUR" => Unit::Hour,
            "DAY" => Unit::Day,
            "WEEK" => Unit::Week,
            "MONTH" => Unit::Month,
            "QUARTER" => Unit::Quarter,
            "YEAR" => Unit::Year,
            _ => return None,
        })
    }

    /// Months in one unit, for the calendar units.
    fn months(self) -> Option<i64> {
        match self {
            Unit::Month => Some(1),
            Unit::Quarter => Some(3),
            Unit::Year => Some(12),
            _ => None,
        }
    }

    /// Seconds in one unit, for the others.
    fn seconds(self) -> i64 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3600,
            Unit::Day => 86_400,
            _ => 7 * 86_400,
        }
    }
}

/// `t` plus `n` units; `None` past the calendar's range.
pub(crate) fn add(unit: Unit, n: i64, t: NaiveDateTime) -> Option<NaiveDateTime> {
    match unit.months() {
        Some(per) => add_months(t, n.checked_mul(per)?),
        None => t.checked_add_signed(TimeDelta::try_seconds(n.checked_mul(unit.seconds())?)?),
    }
}

/// Whole units from `t1` to `t2` (negative when `t2` is earlier).
pub(crate) fn diff(unit: Unit, t1: NaiveDateTime, t2: NaiveDateTime) -> Option<i64> {
    match unit.months() {
        Some(per) => Some(months_between(t1, t2)? / per),
        None => {
            let micros = (t2 - t1).num_microseconds()?;
            Some(micros / (unit.seconds() * 1_000_000))
        }
    }
}

fn add_months(t: NaiveDateTime, months: i64) -> Option<NaiveDateTime> {
    let magnitude = Months::new(u32::try_from(months.unsigned_abs()).ok()?);
    if months >= 0 {
        t.checked_add_months(magnitude)
    } else {
        t.checked_sub_months(magnitude)
    }
}

/// Calendar months from `t1` to `t2` as Flink counts them (Calcite's
/// `DateTimeUtils.subtractMonths`): the whole months between the two dates, less one
/// when `t2` falls on the date of `t1` plus those months but earlier in the day. This
/// is not symmetric: from 2025-02-01 12:00 back to 2025-01-01 10:00 is -2 months, and
/// from 00:00:02 back to 00:00:01 on one day is -1 month (Flink 2.3 answers so).
fn months_between(t1: NaiveDateTime, t2: NaiveDateTime) -> Option<i64> {
    let (d1, d2) = (t1.date(), t2.date());
    let mut months = date_months(d1, d2)?;
    if add_months_to_date(d1, months)? == d2 && t2.time() < t1.time() {
        months -= 1;
    }
    Some(months)
}

/// Whole months from date `d1` to date `d2`: the most `m` with `d1 + m months <= d2`
/// when `d2` is later, the negated count the other way.
fn date_months(d1: NaiveDate, d2: NaiveDate) -> Option<i64> {
    if d2 < d1 {
        return date_months(d2, d1).map(|m| -m);
    }
    // No month is longer than 31 days: a first guess never past the answer.
    let mut months = (d2 - d1).num_days() / 31;
    while add_months_to_date(d1, months + 1)? <= d2 {
        months += 1;
    }
    Some(months)
}

fn add_months_to_date(d: NaiveDate, months: i64) -> Option<NaiveDate> {
    add_months(d.and_time(chrono::NaiveTime::MIN), months).map(|t| t.date())
}

/// Which of the two functions a [`TimestampUnits`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Call {
    Add,
    Diff,
}

impl Call {
    /// The name the rewrite calls.
    fn udf_name(self) -> &'static str {
        match self {
            Call::Add => "riffle_timestampadd",
            Call::Diff => "riffle_timestampdiff",
        }
    }

    /// The name the user wrote, for errors.
    fn shown(self) -> &'static str {
        match self {
            Call::Add => "TIMESTAMPADD",
            Call::Diff => "TIMESTAMPDIFF",
        }
    }
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct TimestampUnits {
    call: Call,
    signature: Signature,
}

/// The unit of a call: its first argument, a string literal the rewrite put there.
fn unit_of(value: Option<&ScalarValue>, name: &str) -> datafusion::common::Result<Unit> {
    match super::string_literal(value).and_then(Unit::parse) {
        Some(unit) => Ok(unit),
        None => plan_err!("{name} takes a unit first: {UNITS}"),
    }
}

/// A timestamp column as microseconds without a zone.
fn as_naive_micros(values: &ArrayRef) -> datafusion::common::Result<ArrayRef> {
    Ok(cast(
        values,
        &DataType::Timestamp(TimeUnit::Microsecond, None),
    )?)
}

fn naive(micros: i64) -> Option<NaiveDateTime> {
    chrono::DateTime::from_timestamp_micros(micros).map(|t| t.naive_utc())
}

impl ScalarUDFImpl for TimestampUnits {
    fn name(&self) -> &str {
        self.call.udf_name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> datafusion::common::Result<DataType> {
        match (self.call, args) {
            (Call::Diff, _) => Ok(DataType::Int32),
            (Call::Add, [_, _, t]) => Ok(t.clone()),
            (Call::Add, _) => plan_err!("TIMESTAMPADD(unit, n, timestamp)"),
        }
    }

    fn return_field_from_args(
        &self,
        args: ReturnFieldArgs,
    ) -> datafusion::common::Result<FieldRef> {
        let shown = self.call.shown();
        let time = |t: &DataType| matches!(t, DataType::Timestamp(..) | DataType::Null);
        let [unit, a, b] = args.arg_fields else {
            return plan_err!("{shown} takes three arguments");
        };
        unit_of(args.scalar_arguments[0], shown)?;
        let (fits, wanted) = match self.call {
            Call::Diff => (
                time(a.data_type()) && time(b.data_type()),
                "timestamp, timestamp",
            ),
            Call::Add => (
                a.data_type().is_integer() && time(b.data_type()),
                "integer, timestamp",
            ),
        };
        if !fits || !matches!(unit.data_type(), DataType::Utf8) {
            return plan_err!(
                "{shown} takes (unit, {wanted}): got {} and {}",
                a.data_type(),
                b.data_type()
            );
        }
        let types = [
            unit.data_type().clone(),
            a.data_type().clone(),
            b.data_type().clone(),
        ];
        Ok(Arc::new(Field::new(
            self.name(),
            self.return_type(&types)?,
            true,
        )))
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        let shown = self.call.shown();
        let unit = match &args.args[0] {
            ColumnarValue::Scalar(v) => unit_of(Some(v), shown)?,
            _ => return exec_err!("{shown} takes its unit as a literal"),
        };
        let rows = args.number_rows;
        let a = args.args[1].to_array(rows)?;
        let b = as_naive_micros(&args.args[2].to_array(rows)?)?;
        let b = b.as_primitive::<datafusion::arrow::datatypes::TimestampMicrosecondType>();
        if self.call == Call::Diff {
            let a = as_naive_micros(&a)?;
            let a = a.as_primitive::<datafusion::arrow::datatypes::TimestampMicrosecondType>();
            let mut out = Int32Builder::with_capacity(rows);
            for i in 0..rows {
                let value = (a.is_valid(i) && b.is_valid(i))
                    .then(|| diff(unit, naive(a.value(i))?, naive(b.value(i))?))
                    .flatten()
                    .and_then(|d| i32::try_from(d).ok());
                out.append_option(value);
            }
            return Ok(ColumnarValue::Array(Arc::new(out.finish())));
        }
        let n = cast(&a, &DataType::Int64)?;
        let n: &Int64Array = n.as_primitive();
        let micros: datafusion::arrow::array::TimestampMicrosecondArray = (0..rows)
            .map(|i| {
                (n.is_valid(i) && b.is_valid(i))
                    .then(|| add(unit, n.value(i), naive(b.value(i))?))
                    .flatten()
                    .map(|t| t.and_utc().timestamp_micros())
            })
            .collect();
        let target = args.return_field.data_type();
        Ok(ColumnarValue::Array(cast(
            &(Arc::new(micros) as ArrayRef),
            target,
        )?))
    }
}

/// `riffle_timestampadd(unit, n, t)`, what `TIMESTAMPADD` is rewritten to.
pub fn timestampadd_udf() -> ScalarUDF {
    ScalarUDF::from(TimestampUnits {
        call: Call::Add,
        signature: Signature::any(3, Volatility::Immutable),
    })
}

/// `riffle_timestampdiff(unit, t1, t2)`, what `TIMESTAMPDIFF` is rewritten to.
pub fn timestampdiff_udf() -> ScalarUDF {
    ScalarUDF::from(TimestampUnits {
        call: Call::Diff,
        signature: Signature::any(3, Volatility::Immutable),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Unit; 8] = [
        Unit::Second,
        Unit::Minute,
        Unit::Hour,
        Unit::Day,
        Unit::Week,
        Unit::Month,
        Unit::Quarter,
        Unit::Year,
    ];

    fn at(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f").unwrap()
    }

    /// `TIMESTAMPDIFF(unit, a, b)` for each unit, as Flink 2.3 answered.
    #[test]
    fn differences_are_flinks() {
        let flink: [(&str, &str, [i64; 8]); 15] = [
            (
                "2003-01-02 10:00:00",
                "2003-01-03 10:00:00",
                [86400, 1440, 24, 1, 0, 0, 0, 0],
            ),
            (
                "2025-02-01 10:00:00",
                "2025-01-01 12:00:00",
                [-2671200, -44520, -742, -30, -4, -1, 0, 0],
            ),
            (
                "2025-02-01 12:00:00",
                "2025-01-01 10:00:00",
                [-2685600, -44760, -746, -31, -4, -2, 0, 0],
            ),
            (
                "2025-01-01 12:00:00",
                "2025-02-01 10:00:00",
                [2671200, 44520, 742, 30, 4, 0, 0, 0],
            ),
            (
                "2025-01-01 10:00:00",
                "2025-02-01 12:00:00",
                [2685600, 44760, 746, 31, 4, 1, 0, 0],
            ),
            (
                "2025-01-31 10:00:00",
                "2025-02-28 10:00:00",
                [2419200, 40320, 672, 28, 4, 1, 0, 0],
            ),
            (
                "2025-01-31 10:00:00",
                "2025-02-28 09:59:59",
                [2419199, 40319, 671, 27, 3, 0, 0, 0],
            ),
            (
                "2025-03-31 00:00:00",
                "2025-02-28 00:00:00",
                [-2678400, -44640, -744, -31, -4, -1, 0, 0],
            ),
            (
                "2024-02-29 00:00:00",
                "2025-02-28 00:00:00",
                [31536000, 525600, 8760, 365, 52, 12, 4, 1],
            ),
            (
                "2024-02-29 00:00:00",
                "2028-02-29 00:00:00",
                [126230400, 2103840, 35064, 1461, 208, 48, 16, 4],
            ),
            (
                "2025-01-01 00:00:00.900",
                "2025-01-01 00:00:02.100",
                [1, 0, 0, 0, 0, 0, 0, 0],
            ),
            (
                "2025-01-01 00:00:02.100",
                "2025-01-01 00:00:00.900",
                [-1, 0, 0, 0, 0, -1, 0, 0],
            ),
            (
                "2020-06-15 08:00:00",
                "2025-03-10 07:00:00",
                [149382000, 2489700, 41495, 1728, 246, 56, 18, 4],
            ),
            (
                "2025-03-10 07:00:00",
                "2020-06-15 08:00:00",
                [-149382000, -2489700, -41495, -1728, -246, -56, -18, -4],
            ),
            (
                "1969-12-31 23:59:59.500",
                "1970-01-01 00:00:00.400",
                [0, 0, 0, 0, 0, 0, 0, 0],
            ),
        ];
        for (a, b, expected) in flink {
            let ours: Vec<i64> = ALL
                .iter()
                .map(|u| diff(*u, at(a), at(b)).unwrap())
                .collect();
            assert_eq!(ours, expected, "{a} to {b}");
        }
    }

    /// `TIMESTAMPADD(unit, n, t)` for each unit, as Flink 2.3 answered.
    #[test]
    fn sums_are_flinks() {
        let flink: [(&str, i64, [&str; 8]); 8] = [
            (
                "2025-01-31 10:00:00",
                1,
                [
                    "2025-01-31 10:00:01",
                    "2025-01-31 10:01:00",
                    "2025-01-31 11:00:00",
                    "2025-02-01 10:00:00",
                    "2025-02-07 10:00:00",
                    "2025-02-28 10:00:00",
                    "2025-04-30 10:00:00",
                    "2026-01-31 10:00:00",
                ],
            ),
            (
                "2025-01-31 10:00:00",
                -1,
                [
                    "2025-01-31 09:59:59",
                    "2025-01-31 09:59:00",
                    "2025-01-31 09:00:00",
                    "2025-01-30 10:00:00",
                    "2025-01-24 10:00:00",
                    "2024-12-31 10:00:00",
                    "2024-10-31 10:00:00",
                    "2024-01-31 10:00:00",
                ],
            ),
            (
                "2025-01-31 10:00:00",
                13,
                [
                    "2025-01-31 10:00:13",
                    "2025-01-31 10:13:00",
                    "2025-01-31 23:00:00",
                    "2025-02-13 10:00:00",
                    "2025-05-02 10:00:00",
                    "2026-02-28 10:00:00",
                    "2028-04-30 10:00:00",
                    "2038-01-31 10:00:00",
                ],
            ),
            (
                "2025-01-31 10:00:00",
                -13,
                [
                    "2025-01-31 09:59:47",
                    "2025-01-31 09:47:00",
                    "2025-01-30 21:00:00",
                    "2025-01-18 10:00:00",
                    "2024-11-01 10:00:00",
                    "2023-12-31 10:00:00",
                    "2021-10-31 10:00:00",
                    "2012-01-31 10:00:00",
                ],
            ),
            (
                "2024-02-29 23:59:59.999",
                1,
                [
                    "2024-03-01 00:00:00.999",
                    "2024-03-01 00:00:59.999",
                    "2024-03-01 00:59:59.999",
                    "2024-03-01 23:59:59.999",
                    "2024-03-07 23:59:59.999",
                    "2024-03-29 23:59:59.999",
                    "2024-05-29 23:59:59.999",
                    "2025-02-28 23:59:59.999",
                ],
            ),
            (
                "2024-02-29 23:59:59.999",
                12,
                [
                    "2024-03-01 00:00:11.999",
                    "2024-03-01 00:11:59.999",
                    "2024-03-01 11:59:59.999",
                    "2024-03-12 23:59:59.999",
                    "2024-05-23 23:59:59.999",
                    "2025-02-28 23:59:59.999",
                    "2027-02-28 23:59:59.999",
                    "2036-02-29 23:59:59.999",
                ],
            ),
            (
                "2024-02-29 23:59:59.999",
                -12,
                [
                    "2024-02-29 23:59:47.999",
                    "2024-02-29 23:47:59.999",
                    "2024-02-29 11:59:59.999",
                    "2024-02-17 23:59:59.999",
                    "2023-12-07 23:59:59.999",
                    "2023-02-28 23:59:59.999",
                    "2021-02-28 23:59:59.999",
                    "2012-02-29 23:59:59.999",
                ],
            ),
            (
                "2024-02-29 23:59:59.999",
                4,
                [
                    "2024-03-01 00:00:03.999",
                    "2024-03-01 00:03:59.999",
                    "2024-03-01 03:59:59.999",
                    "2024-03-04 23:59:59.999",
                    "2024-03-28 23:59:59.999",
                    "2024-06-29 23:59:59.999",
                    "2025-02-28 23:59:59.999",
                    "2028-02-29 23:59:59.999",
                ],
            ),
        ];
        for (t, n, expected) in flink {
            for (unit, want) in ALL.iter().zip(expected) {
                assert_eq!(
                    add(*unit, n, at(t)),
                    Some(at(want)),
                    "{t} plus {n} {unit:?}"
                );
            }
        }
    }

    #[test]
    fn units_are_named_as_flink_names_them() {
        assert_eq!(Unit::parse("quarter"), Some(Unit::Quarter));
        assert_eq!(Unit::parse("MILLISECOND"), None);
        assert_eq!(add(Unit::Year, i64::MAX, at("2025-01-01 00:00:00")), None);
    }
}
