//! Exact order keys of a numeric column, so that equal values (and only equal values)
//! share a key: a BIGINT above 2^53 compared as a double would tie with its neighbours.

use super::Extreme;
use riffle_core::arrow::array::{Array, ArrayRef, AsArray};
use riffle_core::arrow::compute::cast;
use riffle_core::arrow::datatypes::{
    DataType, Float16Type, Float32Type, Float64Type, Int64Type, UInt64Type,
};
use riffle_core::{Error, Result};

/// Per row, a key that orders the values as SQL does — integers exactly, floats in IEEE
/// total order as Arrow compares them — negated for [`Extreme::Min`], so the extreme is
/// always the largest key. `None` for NULL.
///
/// # Errors
/// A column that is not numeric.
pub(super) fn order_keys(values: &ArrayRef, extreme: Extreme) -> Result<Vec<Option<i128>>> {
    let keys: Vec<Option<i128>> = match values.data_type() {
        DataType::UInt64 => values
            .as_primitive::<UInt64Type>()
            .iter()
            .map(|v| v.map(i128::from))
            .collect(),
        t if t.is_integer() => cast(values, &DataType::Int64)?
            .as_primitive::<Int64Type>()
            .iter()
            .map(|v| v.map(i128::from))
            .collect(),
        // Each float type from its own bits: a cast to f64 would make two NaNs one.
        DataType::Float16 => values
            .as_primitive::<Float16Type>()
            .iter()
            .map(|v| {
                v.map(|v| {
                    let bits = v.to_bits() as i16;
                    i128::from(bits ^ ((((bits >> 15) as u16) >> 1) as i16))
                })
            })
            .collect(),
        DataType::Float32 => values
            .as_primitive::<Float32Type>()
            .iter()
            .map(|v| {
                v.map(|v| {
                    let bits = v.to_bits() as i32;
                    i128::from(bits ^ ((((bits >> 31) as u32) >> 1) as i32))
                })
            })
            .collect(),
        DataType::Float64 => values
            .as_primitive::<Float64Type>()
            .iter()
            .map(|v| v.map(|v| i128::from(total_order(v))))
            .collect(),
        other => {
            return Err(Error::plan(format!(
                "max rows needs a numeric column, not {other}"
            )))
        }
    };
    Ok(match extreme {
        Extreme::Max => keys,
        Extreme::Min => keys.into_iter().map(|k| k.map(|k| -k)).collect(),
    })
}

/// An integer ordered as `f64::total_cmp` orders `v`.
fn total_order(v: f64) -> i64 {
    let bits = v.to_bits() as i64;
    bits ^ ((((bits >> 63) as u64) >> 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::{Float64Array, Int64Array, UInt64Array};
    use std::sync::Arc;

    #[test]
    fn bigints_that_one_double_holds_get_distinct_keys() {
        let big = 1_i64 << 60;
        let values: ArrayRef = Arc::new(Int64Array::from(vec![Some(big), Some(big + 1), None]));
        let keys = order_keys(&values, Extreme::Max).unwrap();
        assert!(keys[1] > keys[0]);
        assert_eq!(keys[2], None);
        let unsigned: ArrayRef = Arc::new(UInt64Array::from(vec![u64::MAX, 0]));
        let keys = order_keys(&unsigned, Extreme::Max).unwrap();
        assert!(keys[0] > keys[1]);
    }

    #[test]
    fn narrower_floats_keep_their_own_order_and_nans() {
        use riffle_core::arrow::array::Float32Array;
        let quiet = f32::from_bits(0x7fc0_0000);
        let other = f32::from_bits(0x7fc0_0001);
        let values: ArrayRef = Arc::new(Float32Array::from(vec![-1.0, 0.5, quiet, other]));
        let keys: Vec<i128> = order_keys(&values, Extreme::Max)
            .unwrap()
            .into_iter()
            .map(Option::unwrap)
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
    }

    #[test]
    fn floats_order_as_arrow_compares_them_and_min_reverses_the_order() {
        let values: ArrayRef = Arc::new(Float64Array::from(vec![
            -1.5,
            -0.0,
            0.0,
            2.0,
            f64::INFINITY,
            f64::NAN,
        ]));
        let keys: Vec<i128> = order_keys(&values, Extreme::Max)
            .unwrap()
            .into_iter()
            .map(Option::unwrap)
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
        let reversed: Vec<i128> = order_keys(&values, Extreme::Min)
            .unwrap()
            .into_iter()
            .map(Option::unwrap)
            .collect();
        assert!(reversed.windows(2).all(|w| w[0] > w[1]));
    }
}
