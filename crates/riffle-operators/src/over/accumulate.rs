//! The aggregate of one OVER frame: folded value by value into an [`Acc`], then
//! finished into the output type. Integer AVG is the sum divided by the count,
//! truncated, as in Flink; AVG of floats is the mean.

use datafusion_common::ScalarValue;
use riffle_core::arrow::datatypes::DataType;
use riffle_core::{Error, Result};

/// An aggregate function of an OVER window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverFunction {
    /// `count(*)`: rows in the frame.
    CountStar,
    /// `count(col)`: non-null values.
    Count,
    /// `sum(col)`.
    Sum,
    /// `min(col)`.
    Min,
    /// `max(col)`.
    Max,
    /// `avg(col)`.
    Avg,
}

impl OverFunction {
    /// The SQL name, for plans.
    pub fn name(self) -> &'static str {
        match self {
            OverFunction::CountStar | OverFunction::Count => "count",
            OverFunction::Sum => "sum",
            OverFunction::Min => "min",
            OverFunction::Max => "max",
            OverFunction::Avg => "avg",
        }
    }
}

/// Values folded so far: how many, and their sum, least or greatest.
#[derive(Debug, Clone, Default)]
pub struct Acc {
    /// Rows (`count(*)`) or non-null values (the others).
    pub count: i64,
    /// Sum (sum, avg), least (min) or greatest (max) of the non-null values.
    pub value: Option<ScalarValue>,
}

impl Acc {
    /// Folds in one row's value.
    ///
    /// # Errors
    /// A sum that overflows.
    pub fn add(&mut self, function: OverFunction, v: &ScalarValue) -> Result<()> {
        if function == OverFunction::CountStar {
            self.count += 1;
            return Ok(());
        }
        if v.is_null() {
            return Ok(());
        }
        self.count += 1;
        self.value = Some(match (self.value.take(), function) {
            (None, _) => v.clone(),
            (Some(a), OverFunction::Sum | OverFunction::Avg) => a
                .add_checked(v)
                .map_err(|e| Error::plan(format!("OVER {}: {e}", function.name())))?,
            (Some(a), OverFunction::Min) => {
                if v.partial_cmp(&a) == Some(std::cmp::Ordering::Less) {
                    v.clone()
                } else {
                    a
                }
            }
            (Some(a), OverFunction::Max) => {
                if v.partial_cmp(&a) == Some(std::cmp::Ordering::Greater) {
                    v.clone()
                } else {
                    a
                }
            }
            (Some(a), _) => a,
        });
        Ok(())
    }

    /// The aggregate as a value of `output`.
    ///
    /// # Errors
    /// A value that does not fit `output`.
    pub fn finish(&self, function: OverFunction, output: &DataType) -> Result<ScalarValue> {
        let value = match function {
            OverFunction::CountStar | OverFunction::Count => ScalarValue::Int64(Some(self.count)),
            OverFunction::Avg => match &self.value {
                None => ScalarValue::Null,
                Some(sum) if output.is_integer() => {
                    let sum = sum.cast_to(&DataType::Int64)?;
                    match sum {
                        // Truncated toward zero, as Java's integer division.
                        ScalarValue::Int64(Some(s)) => ScalarValue::Int64(Some(s / self.count)),
                        _ => ScalarValue::Null,
                    }
                }
                Some(sum) => match sum.cast_to(&DataType::Float64)? {
                    ScalarValue::Float64(Some(s)) => {
                        ScalarValue::Float64(Some(s / self.count as f64))
                    }
                    _ => ScalarValue::Null,
                },
            },
            _ => self.value.clone().unwrap_or(ScalarValue::Null),
        };
        Ok(value.cast_to(output)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fold(function: OverFunction, values: &[Option<i64>], output: DataType) -> ScalarValue {
        let mut acc = Acc::default();
        for v in values {
            acc.add(function, &ScalarValue::Int64(*v)).unwrap();
        }
        acc.finish(function, &output).unwrap()
    }

    #[test]
    fn integer_avg_truncates_as_flink_does() {
        let avg = fold(
            OverFunction::Avg,
            &[Some(1), Some(2), None],
            DataType::Int64,
        );
        assert_eq!(avg, ScalarValue::Int64(Some(1)));
        let avg = fold(OverFunction::Avg, &[Some(-3), Some(-4)], DataType::Int64);
        assert_eq!(avg, ScalarValue::Int64(Some(-3)));
        let avg = fold(OverFunction::Avg, &[Some(1), Some(2)], DataType::Float64);
        assert_eq!(avg, ScalarValue::Float64(Some(1.5)));
    }

    #[test]
    fn counts_min_max_and_sum_skip_nulls_but_count_star_does_not() {
        let values = [Some(5), None, Some(2), Some(9)];
        assert_eq!(
            fold(OverFunction::CountStar, &values, DataType::Int64),
            ScalarValue::Int64(Some(4))
        );
        assert_eq!(
            fold(OverFunction::Count, &values, DataType::Int64),
            ScalarValue::Int64(Some(3))
        );
        assert_eq!(
            fold(OverFunction::Min, &values, DataType::Int64),
            ScalarValue::Int64(Some(2))
        );
        assert_eq!(
            fold(OverFunction::Max, &values, DataType::Int64),
            ScalarValue::Int64(Some(9))
        );
        assert_eq!(
            fold(OverFunction::Sum, &values, DataType::Int64),
            ScalarValue::Int64(Some(16))
        );
        assert_eq!(
            fold(OverFunction::Sum, &[None], DataType::Int64),
            ScalarValue::Int64(None)
        );
    }
}
