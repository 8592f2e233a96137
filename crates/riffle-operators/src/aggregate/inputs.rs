//! A batch's aggregate input columns, widened to the types the accumulators use.

use super::{BoundAggregate, NumericKind};
use riffle_core::arrow::array::{ArrayRef, AsArray, Float64Array, Int64Array};
use riffle_core::arrow::compute::cast;
use riffle_core::arrow::datatypes::{DataType, Float64Type, Int64Type};
use riffle_core::Result;

/// A batch's input column, normalised for accumulation.
pub(crate) enum Input {
    None,
    Int(Int64Array),
    Float(Float64Array),
    Text(ArrayRef),
}

/// Widens each aggregate's input column of a batch to the type its accumulator uses.
pub(crate) fn normalize_inputs(
    aggregates: &[BoundAggregate],
    columns: &[ArrayRef],
) -> Result<Vec<Input>> {
    aggregates
        .iter()
        .map(|a| {
            let Some(i) = a.input else {
                return Ok(Input::None);
            };
            let c = &columns[i];
            Ok(match a.kind {
                NumericKind::Int => Input::Int(
                    cast(c, &DataType::Int64)?
                        .as_primitive::<Int64Type>()
                        .clone(),
                ),
                NumericKind::Float => Input::Float(
                    cast(c, &DataType::Float64)?
                        .as_primitive::<Float64Type>()
                        .clone(),
                ),
                NumericKind::Text => Input::Text(c.clone()),
            })
        })
        .collect()
}
