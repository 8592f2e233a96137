//! A batch's aggregate input columns, widened to the types the accumulators use, with
//! each aggregate's `FILTER` applied.

use super::shared_distinct::MAX_MEMBERS;
use super::{AggregateFunction, BoundAggregate, NumericKind};
use riffle_core::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array};
use riffle_core::arrow::compute::kernels::boolean::not;
use riffle_core::arrow::compute::kernels::nullif::nullif;
use riffle_core::arrow::compute::{cast, prep_null_mask_filter};
use riffle_core::arrow::datatypes::{DataType, Float64Type, Int64Type};
use riffle_core::{Error, Result};

/// A batch's input column, normalised for accumulation.
pub(crate) enum Input {
    None,
    Int(Int64Array),
    Float(Float64Array),
    Text(ArrayRef),
}

/// Several count DISTINCT aggregates over one column, whose values are kept in one map
/// (`SharedDistinct`): the column and, per member, the aggregate it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SharedColumn {
    pub(crate) input: usize,
    pub(crate) kind: NumericKind,
    pub(crate) members: Vec<usize>,
}

/// Count DISTINCT aggregates over the same column (two or more), grouped by column in
/// the order they first appear, at most [`MAX_MEMBERS`] per group.
pub(crate) fn shared_columns(aggregates: &[BoundAggregate]) -> Vec<SharedColumn> {
    let mut shared: Vec<SharedColumn> = Vec::new();
    for (i, a) in aggregates.iter().enumerate() {
        let Some(input) = a
            .input
            .filter(|_| a.function == AggregateFunction::CountDistinct)
        else {
            continue;
        };
        match shared
            .iter_mut()
            .find(|s| s.input == input && s.kind == a.kind && s.members.len() < MAX_MEMBERS)
        {
            Some(s) => s.members.push(i),
            None => shared.push(SharedColumn {
                input,
                kind: a.kind,
                members: vec![i],
            }),
        }
    }
    shared.retain(|s| s.members.len() > 1);
    shared
}

/// A batch's inputs: per aggregate (`Input::None` for members of a shared column), and
/// per shared column its values and each member's rows.
pub(crate) struct Inputs {
    pub(crate) values: Vec<Input>,
    pub(crate) shared: Vec<SharedInput>,
}

/// A shared column's values and, per member, the rows its filter lets through (`None`:
/// every row).
pub(crate) struct SharedInput {
    pub(crate) values: Input,
    pub(crate) filters: Vec<Option<BooleanArray>>,
}

/// Widens each aggregate's input column of a batch to the type its accumulator uses;
/// a filtered aggregate's input is NULL where its filter is not TRUE (every aggregate
/// skips NULLs; `count(*)` then counts a column of zeros).
pub(crate) fn normalize_inputs(
    aggregates: &[BoundAggregate],
    columns: &[ArrayRef],
) -> Result<Inputs> {
    let shared_columns = shared_columns(aggregates);
    let is_shared = |i: usize| shared_columns.iter().any(|s| s.members.contains(&i));
    let passing = |a: &BoundAggregate| -> Result<Option<BooleanArray>> {
        let Some(f) = a.filter else {
            return Ok(None);
        };
        let filter = columns[f].as_boolean_opt().ok_or_else(|| {
            Error::plan(format!(
                "the filter of `{}` is not BOOLEAN",
                a.output.name()
            ))
        })?;
        // A NULL filter does not count the row (Arrow's helper expects some NULLs).
        Ok(Some(match filter.null_count() {
            0 => filter.clone(),
            _ => prep_null_mask_filter(filter),
        }))
    };
    let mut values = Vec::with_capacity(aggregates.len());
    for (i, a) in aggregates.iter().enumerate() {
        if is_shared(i) {
            values.push(Input::None);
            continue;
        }
        let Some(filter) = passing(a)? else {
            values.push(match a.input {
                Some(c) => normalize(&columns[c], a.kind)?,
                None => Input::None,
            });
            continue;
        };
        let column = match a.input {
            Some(c) => columns[c].clone(),
            // count(*) FILTER: a column that is NULL where the row does not count.
            None => std::sync::Arc::new(Int64Array::from(vec![0; filter.len()])) as ArrayRef,
        };
        values.push(normalize(
            &nullif(column.as_ref(), &not(&filter)?)?,
            a.kind,
        )?);
    }
    let shared = shared_columns
        .iter()
        .map(|s| {
            Ok(SharedInput {
                values: normalize(&columns[s.input], s.kind)?,
                filters: s
                    .members
                    .iter()
                    .map(|&m| passing(&aggregates[m]))
                    .collect::<Result<_>>()?,
            })
        })
        .collect::<Result<_>>()?;
    Ok(Inputs { values, shared })
}

fn normalize(column: &ArrayRef, kind: NumericKind) -> Result<Input> {
    Ok(match kind {
        NumericKind::Int => Input::Int(
            cast(column, &DataType::Int64)?
                .as_primitive::<Int64Type>()
                .clone(),
        ),
        NumericKind::Float => Input::Float(
            cast(column, &DataType::Float64)?
                .as_primitive::<Float64Type>()
                .clone(),
        ),
        NumericKind::Text => Input::Text(column.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::super::{bind_all, AggregateSpec};
    use super::*;
    use riffle_core::arrow::datatypes::Field;
    use riffle_core::StreamSchema;

    fn bound(specs: &[AggregateSpec]) -> Vec<BoundAggregate> {
        let schema = StreamSchema::with_timestamp(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Utf8, true),
            Field::new("p", DataType::Boolean, true),
        ]);
        bind_all(specs, &schema).unwrap()
    }

    #[test]
    fn count_distincts_over_one_column_share_a_map_and_a_lone_one_keeps_its_own() {
        use AggregateFunction::{CountDistinct, Sum};
        let specs = [
            AggregateSpec::new(CountDistinct, "a", "all_a"),
            AggregateSpec::new(CountDistinct, "b", "all_b"),
            AggregateSpec::new(Sum, "a", "sum_a"),
            AggregateSpec::new(CountDistinct, "a", "some_a").with_filter("p"),
        ];
        let shared = shared_columns(&bound(&specs));
        assert_eq!(
            shared,
            [SharedColumn {
                input: 0,
                kind: NumericKind::Int,
                members: vec![0, 3],
            }]
        );
    }

    #[test]
    fn a_map_holds_at_most_one_bit_per_member() {
        let specs: Vec<AggregateSpec> = (0..MAX_MEMBERS + 2)
            .map(|i| AggregateSpec::new(AggregateFunction::CountDistinct, "a", &format!("d{i}")))
            .collect();
        let shared = shared_columns(&bound(&specs));
        let sizes: Vec<usize> = shared.iter().map(|s| s.members.len()).collect();
        assert_eq!(sizes, [MAX_MEMBERS, 2]);
    }

    #[test]
    fn a_filtered_aggregate_sees_null_where_its_filter_is_not_true() {
        let specs = [
            AggregateSpec::count_star("n").with_filter("p"),
            AggregateSpec::new(AggregateFunction::Sum, "a", "s").with_filter("p"),
        ];
        let columns: Vec<ArrayRef> = vec![
            std::sync::Arc::new(Int64Array::from(vec![Some(1), Some(2), None, Some(4)])),
            std::sync::Arc::new(riffle_core::arrow::array::StringArray::from(vec![
                "x", "y", "z", "w",
            ])),
            std::sync::Arc::new(BooleanArray::from(vec![
                Some(true),
                Some(false),
                Some(true),
                None,
            ])),
        ];
        let inputs = normalize_inputs(&bound(&specs), &columns).unwrap();
        let valid = |i: &Input| match i {
            Input::Int(a) => (0..a.len()).map(|r| a.is_valid(r)).collect::<Vec<_>>(),
            _ => panic!("an integer input"),
        };
        assert_eq!(valid(&inputs.values[0]), [true, false, true, false]);
        assert_eq!(valid(&inputs.values[1]), [true, false, false, false]);
    }
}
