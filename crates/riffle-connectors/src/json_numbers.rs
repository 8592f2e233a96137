//! JSON numbers into integer and DECIMAL columns, exactly from their text.
//!
//! Arrow's JSON decoder reads a number it cannot take as an integer through an f64:
//! below −2^63 it clamped to −2^63, `9007199254740993.0` lost its last digit, and a
//! DECIMAL was cut to its scale (1.999 → 1.99). So for JSON the text decoder reads these
//! columns as text (a number keeps its digits) and this module gives each value:
//!
//! - an integer column takes a number's exact value truncated toward zero (`1.9` → 1,
//!   `-1.9` → −1, `1e3` → 1000), as Flink's JSON format truncates a fraction; a value
//!   outside the column's type is an error, never clamped;
//! - a DECIMAL(p, s) column takes the exact value rounded half-up (away from zero) to
//!   scale `s`, as Flink's `DecimalData.fromBigDecimal` rounds; more than `p` digits
//!   after rounding is an error.
//!
//! The text is a JSON number, or a string the strict check (`json_check.rs`) let
//! through: for an integer column a JSON integer's spelling, for a DECIMAL any decimal
//! number (`"1.005"`, as Flink parses a string with `new BigDecimal`).

use riffle_core::arrow::array::{
    Array, ArrayRef, ArrowPrimitiveType, Decimal128Array, PrimitiveBuilder, StringArray,
};
use riffle_core::arrow::datatypes::{
    DataType, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type,
    UInt8Type,
};
use std::sync::Arc;

/// How the digits past the wanted scale go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rounding {
    /// Dropped: the integer part of the value.
    TowardZero,
    /// Half a unit or more rounds away from zero (Java's `RoundingMode.HALF_UP`).
    HalfUp,
}

/// A decimal number's text: `-12.5e3` has sign `-`, digits `12` and `5`, exponent 3.
pub(crate) struct DecimalText<'a> {
    negative: bool,
    pub(crate) whole: &'a [u8],
    pub(crate) fraction: &'a [u8],
    pub(crate) exponent: i64,
}

/// Exponents past this are out of any column's range (and keep the arithmetic small).
const EXPONENT_MAX: i64 = 1 << 20;

impl<'a> DecimalText<'a> {
    /// `text` as an optional sign, digits with an optional `.` (a digit on at least one
    /// side), and an optional exponent; `None` for anything else.
    pub(crate) fn parse(text: &'a str) -> Option<Self> {
        let bytes = text.as_bytes();
        let (negative, rest) = match bytes.first() {
            Some(b'-') => (true, &bytes[1..]),
            Some(b'+') => (false, &bytes[1..]),
            _ => (false, bytes),
        };
        let digits = |s: &'a [u8]| s.iter().take_while(|b| b.is_ascii_digit()).count();
        let whole_len = digits(rest);
        let (whole, mut rest) = rest.split_at(whole_len);
        let mut fraction: &[u8] = &[];
        if let Some(after) = rest.strip_prefix(b".") {
            let n = digits(after);
            fraction = &after[..n];
            rest = &after[n..];
        }
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        let mut exponent = 0i64;
        if let Some(after) = rest.strip_prefix(b"e").or_else(|| rest.strip_prefix(b"E")) {
            let (sign, after) = match after.first() {
                Some(b'-') => (-1, &after[1..]),
                Some(b'+') => (1, &after[1..]),
                _ => (1, after),
            };
            let n = digits(after);
            if n == 0 {
                return None;
            }
            let magnitude = after[..n].iter().fold(0i64, |e, b| {
                (e * 10 + i64::from(b - b'0')).min(EXPONENT_MAX)
            });
            exponent = sign * magnitude;
            rest = &after[n..];
        }
        rest.is_empty().then_some(Self {
            negative,
            whole,
            fraction,
            exponent,
        })
    }

    /// The value times 10^`scale`, rounded to an integer; `None` past ±(2^127 − 1).
    fn scaled(&self, scale: i64, rounding: Rounding) -> Option<i128> {
        let all = || self.whole.iter().chain(self.fraction).copied();
        let leading_zeros = all().take_while(|&d| d == b'0').count();
        let significant = self.whole.len() + self.fraction.len() - leading_zeros;
        // The value is (significant digits) × 10^shift.
        let shift = self.exponent - self.fraction.len() as i64 + scale;
        let kept = significant as i64 + shift.min(0);
        let mut value: i128 = 0;
        let mut digits = all().skip(leading_zeros);
        for digit in digits.by_ref().take(kept.max(0) as usize) {
            value = value
                .checked_mul(10)?
                .checked_add(i128::from(digit - b'0'))?;
        }
        if significant > 0 && shift > 0 {
            value = value.checked_mul(10i128.checked_pow(u32::try_from(shift).ok()?)?)?;
        }
        if rounding == Rounding::HalfUp && kept >= 0 {
            // The first digit dropped (none when `kept` is all of them).
            if digits.next().is_some_and(|d| d >= b'5') {
                value = value.checked_add(1)?;
            }
        }
        Some(if self.negative { -value } else { value })
    }
}

/// `text` as an integer: its value truncated toward zero, `None` when it is no number
/// or past ±(2^127 − 1).
fn integer(text: &str) -> Option<i128> {
    DecimalText::parse(text)?.scaled(0, Rounding::TowardZero)
}

/// `text` as the unscaled value of a DECIMAL(`precision`, `scale`): rounded half-up,
/// `None` when it is no number or has more than `precision` digits after rounding.
pub(crate) fn decimal(text: &str, precision: u8, scale: i8) -> Option<i128> {
    let value = DecimalText::parse(text)?.scaled(i64::from(scale), Rounding::HalfUp)?;
    within_precision(value, precision)
}

fn within_precision(value: i128, precision: u8) -> Option<i128> {
    (value.unsigned_abs() < 10u128.checked_pow(u32::from(precision))?).then_some(value)
}

/// The integer `value` as the unscaled value of a DECIMAL(`precision`, `scale`), as
/// [`decimal`] reads its text; `None` past the precision.
pub(crate) fn decimal_of_integer(value: i128, precision: u8, scale: i8) -> Option<i128> {
    let unit = 10i128.checked_pow(u32::try_from(scale).ok()?)?;
    within_precision(value.checked_mul(unit)?, precision)
}

/// Below this many significant digits every decimal number is told apart by the f64
/// nearest it (IEEE 754's 15 decimal digits of a double, for normal values).
const DIGITS_A_DOUBLE_KEEPS: i32 = 15;

/// The unscaled value of a DECIMAL(`precision`, `scale`) that [`decimal`] reads from a
/// JSON number's text, from `nearest` alone, the f64 nearest that number (JSON's fast
/// path has the number only so); `None` where `nearest` cannot tell, for the number to
/// be read from its text.
///
/// The text and the f64's shortest text `shortest` (which reads back as the same f64)
/// round to the same value unless a midpoint between two values of the scale lies
/// between them or is one of them. Below 10^(14 − scale) a midpoint has at most 15
/// significant digits, so if the f64 nearest it were `nearest`, it would be the shortest
/// text of `nearest`: no midpoint lies between them unless `shortest` is one, and then
/// `None`. Larger numbers, and scales past 14, are left to the text. (Numbers far from a
/// midpoint are rounded in f64 arithmetic, which cannot reach across one.)
pub(crate) fn decimal_of_double(nearest: f64, precision: u8, scale: i8) -> Option<i128> {
    let places = i32::from(scale);
    if !(0..DIGITS_A_DOUBLE_KEEPS).contains(&places)
        || !nearest.is_finite()
        || nearest.abs() >= 10f64.powi(DIGITS_A_DOUBLE_KEEPS - 1 - places)
    {
        return None;
    }
    // Most values are far from a midpoint: `nearest` × 10^scale is within 1.5 of its
    // last place (below 2^47, at most 2^-6) of the text's value × 10^scale, so where its
    // fraction is 0.1 or more from one half, both round to the same integer.
    let scaled = nearest * 10f64.powi(places);
    if (scaled.abs().fract() - 0.5).abs() > 0.1 {
        return within_precision(scaled.round() as i128, precision);
    }
    let mut text = ryu::Buffer::new();
    let shortest = DecimalText::parse(text.format_finite(nearest))?;
    // (Shortest texts end in a digit other than 0, but for 0 itself.)
    let last = shortest.fraction.last().or(shortest.whole.last());
    let shortest_places = shortest.fraction.len() as i64 - shortest.exponent;
    if shortest_places == i64::from(scale) + 1 && last == Some(&b'5') {
        return None; // a midpoint: the text may lie on either side of it
    }
    within_precision(
        shortest.scaled(i64::from(scale), Rounding::HalfUp)?,
        precision,
    )
}

/// Whether [`number_column`] converts a text column to `target`.
pub(crate) fn read_as_text(target: &DataType) -> bool {
    matches!(
        target,
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Decimal128(..)
    )
}

/// The text column `text` of the field `field` as `target` (a type
/// [`read_as_text`] takes), value by value.
///
/// # Errors
/// A value that is no number, or is outside `target`'s range: the message names the
/// field (as Arrow's do, `field '…'`) and the value.
pub(crate) fn number_column(
    text: &StringArray,
    target: &DataType,
    field: &str,
) -> std::result::Result<ArrayRef, String> {
    let bad = |value: &str| {
        if DecimalText::parse(value).is_none() {
            format!("field '{field}': `{value}` is not a number")
        } else {
            format!(
                "field '{field}': `{value}` is outside the range of {}",
                sql_name(target)
            )
        }
    };
    match target {
        DataType::Int8 => integers::<Int8Type>(text, bad),
        DataType::Int16 => integers::<Int16Type>(text, bad),
        DataType::Int32 => integers::<Int32Type>(text, bad),
        DataType::Int64 => integers::<Int64Type>(text, bad),
        DataType::UInt8 => integers::<UInt8Type>(text, bad),
        DataType::UInt16 => integers::<UInt16Type>(text, bad),
        DataType::UInt32 => integers::<UInt32Type>(text, bad),
        DataType::UInt64 => integers::<UInt64Type>(text, bad),
        DataType::Decimal128(precision, scale) => {
            let values = text
                .iter()
                .map(|v| {
                    v.map(|v| decimal(v, *precision, *scale).ok_or_else(|| bad(v)))
                        .transpose()
                })
                .collect::<std::result::Result<Vec<Option<i128>>, String>>()?;
            let array = Decimal128Array::from(values)
                .with_precision_and_scale(*precision, *scale)
                .map_err(|e| e.to_string())?;
            Ok(Arc::new(array))
        }
        other => Err(format!(
            "field '{field}': {other} is not read from text (a bug)"
        )),
    }
}

fn integers<T>(
    text: &StringArray,
    bad: impl Fn(&str) -> String,
) -> std::result::Result<ArrayRef, String>
where
    T: ArrowPrimitiveType,
    T::Native: TryFrom<i128>,
{
    let mut builder = PrimitiveBuilder::<T>::with_capacity(text.len());
    for value in text.iter() {
        match value {
            None => builder.append_null(),
            Some(v) => {
                let n = integer(v)
                    .and_then(|n| T::Native::try_from(n).ok())
                    .ok_or_else(|| bad(v))?;
                builder.append_value(n);
            }
        }
    }
    Ok(Arc::new(builder.finish()))
}

/// The SQL name of an integer or DECIMAL type, for errors.
fn sql_name(data_type: &DataType) -> String {
    match data_type {
        DataType::Int8 => "TINYINT".into(),
        DataType::Int16 => "SMALLINT".into(),
        DataType::Int32 => "INT".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::Decimal128(p, s) => format!("DECIMAL({p}, {s})"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::AsArray;

    #[test]
    fn an_integer_column_truncates_a_fraction_toward_zero_exactly() {
        for (text, value) in [
            ("0", 0),
            ("-0", 0),
            ("1.9", 1),
            ("-1.9", -1),
            ("1e3", 1000),
            ("1.5E1", 15),
            ("12e-1", 1),
            ("1e-400", 0),
            ("0.000e999999999", 0),
            ("9007199254740993.0", 9_007_199_254_740_993),
            ("-9223372036854775808", i64::MIN.into()),
            ("-9223372036854775809", -9_223_372_036_854_775_809),
            (
                "123456789012345678901234567890.5",
                123_456_789_012_345_678_901_234_567_890,
            ),
        ] {
            assert_eq!(integer(text), Some(value), "{text}");
        }
        for text in [
            "", "-", "1e", "1.2.3", ".", "e5", "1e+", "0x10", " 1", "true", "1e400",
        ] {
            assert_eq!(integer(text), None, "{text}");
        }
    }

    #[test]
    fn a_decimal_rounds_half_up_on_the_exact_value() {
        for (text, value) in [
            ("1.005", 101),
            ("-1.005", -101),
            ("1.004999999999999999999", 100),
            ("1.999", 200),
            ("1.015", 102),
            ("0.125", 13),
            ("0.0049", 0),
            ("0.005", 1),
            ("-0.005", -1),
            ("12", 1200),
            ("1e2", 10000),
            ("125e-3", 13),
            ("99999999.994", 9_999_999_999),
        ] {
            assert_eq!(decimal(text, 10, 2), Some(value), "{text}");
        }
        // More digits than the precision after rounding.
        for text in ["99999999.995", "100000000", "1e8", "-1e8"] {
            assert_eq!(decimal(text, 10, 2), None, "{text}");
        }
    }

    #[test]
    fn a_decimal_from_the_nearest_double_is_the_texts_or_none() {
        let from_double = |text: &str, p, s| decimal_of_double(text.parse().unwrap(), p, s);
        for (text, value) in [
            ("1.5", 150),
            ("-1.5", -150),
            ("0.1", 10),
            ("1.004", 100),
            ("1.006", 101),
            ("0.0049", 0),
            ("-0.0", 0),
            ("0", 0),
            ("12.34e1", 12340),
            ("99999999.994", 9_999_999_999),
            // Not the f64's shortest text, but no midpoint lies between the two.
            ("1.10000000000000000000001", 110),
        ] {
            assert_eq!(from_double(text, 10, 2), decimal(text, 10, 2), "{text}");
            assert_eq!(from_double(text, 10, 2), Some(value), "{text}");
        }
        // A midpoint, or a number whose f64 is one's: the text decides, not the f64.
        for text in [
            "1.005",
            "-1.005",
            "1.00499999999999999999",
            "1.00500000000000000001",
            "0.125",
            "2.675",
        ] {
            assert_eq!(from_double(text, 10, 2), None, "{text}");
        }
        // Past the digits a double tells apart, past the precision, a scale past 14.
        assert_eq!(from_double("1234567890123.5", 38, 2), None);
        assert_eq!(
            from_double("123456789012.5", 38, 2),
            Some(12_345_678_901_250)
        );
        assert_eq!(from_double("99999999.995", 10, 2), None);
        assert_eq!(from_double("1e8", 10, 2), None);
        assert_eq!(from_double("0.5", 38, 15), None);
        assert_eq!(from_double("0.25", 38, 14), Some(25 * 10i128.pow(12)));
        assert_eq!(from_double("1.25", 38, 14), None);
    }

    /// Seeded numbers of up to 17 significant digits, scales 0 to 6: where the f64
    /// gives a value, it is the one the text gives.
    #[test]
    fn decimals_from_doubles_agree_with_their_texts() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut given = 0;
        for _ in 0..200_000 {
            let digits = 1 + next() % 17;
            let mantissa = next() % 10u64.pow(digits as u32);
            let point = next() % (digits + 3);
            let scale = (next() % 7) as i8;
            let text = format!("{mantissa}e-{point}");
            let Some(value) = decimal_of_double(text.parse().unwrap(), 38, scale) else {
                continue;
            };
            given += 1;
            assert_eq!(
                Some(value),
                decimal(&text, 38, scale),
                "{text} at scale {scale}"
            );
        }
        assert!(given > 100_000, "only {given} of 200000");
    }

    #[test]
    fn a_value_outside_the_columns_type_is_refused_naming_field_and_value() {
        let text = StringArray::from(vec![Some("-9223372036854775809"), None]);
        let err = number_column(&text, &DataType::Int64, "i").unwrap_err();
        assert_eq!(
            err,
            "field 'i': `-9223372036854775809` is outside the range of BIGINT"
        );
        let text = StringArray::from(vec![Some("256")]);
        assert!(number_column(&text, &DataType::UInt8, "u").is_err());
        let text = StringArray::from(vec![Some("true")]);
        let err = number_column(&text, &DataType::Int64, "i").unwrap_err();
        assert_eq!(err, "field 'i': `true` is not a number");
        let text = StringArray::from(vec![Some("99999999.995")]);
        let err = number_column(&text, &DataType::Decimal128(10, 2), "d").unwrap_err();
        assert!(err.contains("outside the range of DECIMAL(10, 2)"), "{err}");
    }

    #[test]
    fn columns_keep_nulls_and_take_every_value() {
        let text = StringArray::from(vec![Some("-1.5"), None, Some("7")]);
        let ints = number_column(&text, &DataType::Int32, "i").unwrap();
        let ints = ints.as_primitive::<Int32Type>();
        assert_eq!(ints.iter().collect::<Vec<_>>(), [Some(-1), None, Some(7)]);
        let decimals = number_column(&text, &DataType::Decimal128(5, 1), "d").unwrap();
        assert_eq!(decimals.data_type(), &DataType::Decimal128(5, 1));
        let decimals = decimals.as_primitive::<riffle_core::arrow::datatypes::Decimal128Type>();
        assert_eq!(
            decimals.iter().collect::<Vec<_>>(),
            [Some(-15), None, Some(70)]
        );
    }
}
