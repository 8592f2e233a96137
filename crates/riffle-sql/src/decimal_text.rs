//! The shortest decimal text of a double — the digits Java's `Double.toString` and
//! `BigDecimal.valueOf` give, from which Flink rounds — and that value at a scale,
//! rounded as Flink rounds it. `ROUND`/`TRUNCATE` (`functions/round_truncate.rs`) and
//! `CAST(double AS DECIMAL)` (`translate/numbers.rs`) both start here.

/// `|x| = digits · 10^exponent`, with `digits` the fewest that read back as `x`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShortestDecimal {
    pub(crate) digits: u128,
    pub(crate) exponent: i64,
}

impl ShortestDecimal {
    /// The shortest decimal of `x`'s magnitude; `None` for NaN and the infinities.
    pub(crate) fn of(x: f64) -> Option<Self> {
        if !x.is_finite() {
            return None;
        }
        // `{:e}` is the shortest text that reads back as `x`: `2.85e-1`, `1.2345e3`, `0e0`.
        let text = format!("{:e}", x.abs());
        let (mantissa, exponent) = text.split_once('e')?;
        let exponent: i64 = exponent.parse().ok()?;
        let significand: String = mantissa.chars().filter(char::is_ascii_digit).collect();
        Some(Self {
            digits: significand.parse().ok()?,
            exponent: exponent - (significand.len() as i64 - 1),
        })
    }

    /// The value times `10^scale` as a whole number: the digits below the point dropped,
    /// half up (`half_up`, Java's `HALF_UP`) or toward zero (`DOWN`). `None` when it
    /// does not fit in a `u128`.
    pub(crate) fn at_scale(&self, scale: i64, half_up: bool) -> Option<u128> {
        let shift = self.exponent.checked_add(scale)?;
        if shift >= 0 {
            let unit = 10u128.checked_pow(u32::try_from(shift).ok()?)?;
            return self.digits.checked_mul(unit);
        }
        let dropped = u32::try_from(shift.unsigned_abs()).ok();
        Some(match dropped.and_then(|d| 10u128.checked_pow(d)) {
            Some(unit) => {
                let (whole, rest) = (self.digits / unit, self.digits % unit);
                // `rest * 2` cannot overflow: `rest` is below 10^38.
                whole + u128::from(half_up && rest * 2 >= unit)
            }
            // More digits dropped than there are: the first dropped is a leading zero.
            None => 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_double_is_its_shortest_digits() {
        let d = ShortestDecimal::of(-0.285).unwrap();
        assert_eq!((d.digits, d.exponent), (285, -3));
        let d = ShortestDecimal::of(1250.0).unwrap();
        assert_eq!((d.digits, d.exponent), (125, 1));
        assert_eq!(ShortestDecimal::of(f64::NAN), None);
    }

    #[test]
    fn at_a_scale_the_dropped_digits_round_half_up_or_toward_zero() {
        let d = ShortestDecimal::of(0.285).unwrap();
        assert_eq!(d.at_scale(2, true), Some(29));
        assert_eq!(d.at_scale(2, false), Some(28));
        assert_eq!(d.at_scale(5, true), Some(28_500));
        assert_eq!(d.at_scale(-60, true), Some(0));
        assert_eq!(ShortestDecimal::of(1e300).unwrap().at_scale(2, true), None);
        assert_eq!(d.at_scale(i64::MAX, true), None);
    }
}
