//! Per-group accumulators that can take a row back: counts and sums, each with the
//! number of non-null values it holds, so that a withdrawn row subtracts exactly what
//! its insertion added, and min/max over a multiset of values (`multisets.rs`).
//! Integer sums wrap, so adding and subtracting cancel exactly; float sums take rows
//! back with rounding error, as Flink's do.

use super::multisets::{Answer, Multisets};
use crate::aggregate::{
    normalize_inputs, shared_columns, AggregateFunction, BoundAggregate, Input, NumericKind,
};
use riffle_core::arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int64Array, PrimitiveArray,
};
use riffle_core::arrow::datatypes::{ArrowPrimitiveType, DataType, Field, Float64Type, Int64Type};
use riffle_core::{Error, RecordBatch, Result};
use std::sync::Arc;

/// One aggregate's state over all groups.
#[derive(Debug)]
enum Column {
    /// `count(*)` or `count(col)`: the values counted.
    Count(Vec<i64>),
    /// `sum` or `avg` of integers: the sum and how many values it holds.
    Int {
        sum: Vec<i64>,
        n: Vec<i64>,
        avg: bool,
    },
    /// `sum` or `avg` of floats.
    Float {
        sum: Vec<f64>,
        n: Vec<i64>,
        avg: bool,
    },
    /// `min`, `max` or `count(DISTINCT …)`: every group's values.
    Extreme(Multisets),
}

/// Whether these aggregates can take rows back. Every function can (a `FILTER` is a
/// function of the row, so a withdrawn row passes it as its insertion did), but two
/// `count(DISTINCT …)` of one column share their values in the window aggregates'
/// inputs, which these accumulators do not read.
///
/// # Errors
/// Two or more `count(DISTINCT …)` of the same column.
pub(crate) fn check(aggregates: &[BoundAggregate]) -> Result<()> {
    if !shared_columns(aggregates).is_empty() {
        return Err(Error::plan(
            "two count(DISTINCT …) of one column over rows that can be withdrawn are not supported; count each column once",
        ));
    }
    Ok(())
}

/// The accumulators of every aggregate.
#[derive(Debug)]
pub(crate) struct RetractableSums {
    aggregates: Vec<BoundAggregate>,
    columns: Vec<Column>,
}

impl RetractableSums {
    pub(crate) fn new(aggregates: &[BoundAggregate]) -> Self {
        let columns = aggregates
            .iter()
            .map(|a| match (a.function, a.kind) {
                (AggregateFunction::Sum | AggregateFunction::Avg, NumericKind::Float) => {
                    Column::Float {
                        sum: Vec::new(),
                        n: Vec::new(),
                        avg: a.function == AggregateFunction::Avg,
                    }
                }
                (AggregateFunction::Sum | AggregateFunction::Avg, _) => Column::Int {
                    sum: Vec::new(),
                    n: Vec::new(),
                    avg: a.function == AggregateFunction::Avg,
                },
                (
                    f @ (AggregateFunction::Min
                    | AggregateFunction::Max
                    | AggregateFunction::CountDistinct),
                    kind,
                ) => {
                    let answer = match f {
                        AggregateFunction::Min => Answer::Min,
                        AggregateFunction::Max => Answer::Max,
                        _ => Answer::Distinct,
                    };
                    Column::Extreme(Multisets::new(kind, answer, a.output.data_type().clone()))
                }
                _ => Column::Count(Vec::new()),
            })
            .collect();
        Self {
            aggregates: aggregates.to_vec(),
            columns,
        }
    }

    /// Grows every column to `groups` groups.
    fn reserve(&mut self, groups: usize) {
        for c in &mut self.columns {
            match c {
                Column::Count(v) => v.resize(groups.max(v.len()), 0),
                Column::Int { sum, n, .. } => {
                    sum.resize(groups.max(sum.len()), 0);
                    n.resize(groups.max(n.len()), 0);
                }
                Column::Float { sum, n, .. } => {
                    sum.resize(groups.max(sum.len()), 0.0);
                    n.resize(groups.max(n.len()), 0);
                }
                Column::Extreme(m) => m.reserve(groups),
            }
        }
    }

    /// Adds (`sign` 1) or takes back (`sign` -1) row `rows[i]` of `columns` into group
    /// `groups[i]`, per row.
    pub(crate) fn apply(
        &mut self,
        columns: &[ArrayRef],
        groups: &[u32],
        signs: &[i64],
    ) -> Result<()> {
        let max = groups.iter().copied().max().map_or(0, |g| g as usize + 1);
        self.reserve(max);
        let inputs = normalize_inputs(&self.aggregates, columns)?;
        for (column, input) in self.columns.iter_mut().zip(&inputs.values) {
            match (column, input) {
                (Column::Count(v), Input::None) => {
                    for (&g, &s) in groups.iter().zip(signs) {
                        v[g as usize] += s;
                    }
                }
                (Column::Count(v), Input::Int(a)) => count(v, groups, signs, a),
                (Column::Count(v), Input::Float(a)) => count(v, groups, signs, a),
                (Column::Count(v), Input::Text(a)) => count(v, groups, signs, a.as_ref()),
                (Column::Int { sum, n, .. }, Input::Int(a)) => {
                    for (i, (&g, &s)) in groups.iter().zip(signs).enumerate() {
                        if a.is_valid(i) {
                            sum[g as usize] =
                                sum[g as usize].wrapping_add(s.wrapping_mul(a.value(i)));
                            n[g as usize] += s;
                        }
                    }
                }
                (Column::Float { sum, n, .. }, Input::Float(a)) => {
                    for (i, (&g, &s)) in groups.iter().zip(signs).enumerate() {
                        if a.is_valid(i) {
                            sum[g as usize] += s as f64 * a.value(i);
                            n[g as usize] += s;
                        }
                    }
                }
                (Column::Extreme(m), input) => m.apply(input, groups, signs)?,
                _ => {
                    return Err(Error::plan(
                        "an aggregate's input does not match its accumulator",
                    ))
                }
            }
        }
        Ok(())
    }

    /// The output columns for `groups`.
    pub(crate) fn finish(&self, groups: &[u32]) -> Result<Vec<ArrayRef>> {
        self.columns
            .iter()
            .map(|c| -> Result<ArrayRef> {
                let at = |g: &u32| *g as usize;
                Ok(match c {
                    Column::Count(v) => Arc::new(Int64Array::from_iter_values(
                        groups.iter().map(|g| v[at(g)]),
                    )),
                    Column::Int { sum, n, avg: false } => Arc::new(Int64Array::from_iter(
                        groups.iter().map(|g| (n[at(g)] > 0).then(|| sum[at(g)])),
                    )),
                    Column::Int { sum, n, avg: true } => {
                        Arc::new(Float64Array::from_iter(groups.iter().map(|g| {
                            (n[at(g)] > 0).then(|| sum[at(g)] as f64 / n[at(g)] as f64)
                        })))
                    }
                    Column::Float { sum, n, avg } => {
                        Arc::new(Float64Array::from_iter(groups.iter().map(|g| {
                            let (s, k) = (sum[at(g)], n[at(g)]);
                            (k > 0).then(|| if *avg { s / k as f64 } else { s })
                        })))
                    }
                    Column::Extreme(m) => m.finish(groups)?,
                })
            })
            .collect()
    }

    /// The state of `groups`: per aggregate `{name}__n` (values held) and, for sums and
    /// averages, `{name}__sum`; for min and max the multisets (`multisets.rs`).
    pub(crate) fn state(&self, groups: &[u32]) -> Vec<(Field, ArrayRef)> {
        let mut out = Vec::new();
        for (c, a) in self.columns.iter().zip(&self.aggregates) {
            let name = a.output.name();
            let ints = |v: &Vec<i64>| -> ArrayRef {
                Arc::new(Int64Array::from_iter_values(
                    groups.iter().map(|&g| v[g as usize]),
                ))
            };
            match c {
                Column::Count(v) => out.push((
                    Field::new(format!("{name}__n"), DataType::Int64, false),
                    ints(v),
                )),
                Column::Int { sum, n, .. } => {
                    out.push((
                        Field::new(format!("{name}__n"), DataType::Int64, false),
                        ints(n),
                    ));
                    out.push((
                        Field::new(format!("{name}__sum"), DataType::Int64, false),
                        ints(sum),
                    ));
                }
                Column::Float { sum, n, .. } => {
                    out.push((
                        Field::new(format!("{name}__n"), DataType::Int64, false),
                        ints(n),
                    ));
                    let sums: ArrayRef = Arc::new(Float64Array::from_iter_values(
                        groups.iter().map(|&g| sum[g as usize]),
                    ));
                    out.push((
                        Field::new(format!("{name}__sum"), DataType::Float64, false),
                        sums,
                    ));
                }
                Column::Extreme(m) => out.extend(m.state(name, groups)),
            }
        }
        out
    }

    /// Sets `groups` to the state rows of `batch` (a later row of a group replaces an
    /// earlier one).
    pub(crate) fn restore(
        &mut self,
        groups: &[u32],
        batch: &RecordBatch,
        operator: &str,
    ) -> Result<()> {
        let max = groups.iter().copied().max().map_or(0, |g| g as usize + 1);
        self.reserve(max);
        for (c, a) in self.columns.iter_mut().zip(&self.aggregates) {
            let name = a.output.name();
            let counts = match c {
                Column::Extreme(m) => {
                    m.restore(name, groups, batch, operator)?;
                    continue;
                }
                Column::Count(v) => v,
                Column::Int { sum, n, .. } => {
                    let s = state_values::<Int64Type>(batch, &format!("{name}__sum"), operator)?;
                    set_groups(sum, groups, s.values());
                    n
                }
                Column::Float { sum, n, .. } => {
                    let s = state_values::<Float64Type>(batch, &format!("{name}__sum"), operator)?;
                    set_groups(sum, groups, s.values());
                    n
                }
            };
            let n = state_values::<Int64Type>(batch, &format!("{name}__n"), operator)?;
            set_groups(counts, groups, n.values());
        }
        Ok(())
    }
}

/// The column `name` of a state batch of `operator`, of type `T`.
///
/// # Errors
/// It is missing or of another type: the state was written by a different plan.
pub(super) fn state_values<T: ArrowPrimitiveType>(
    batch: &RecordBatch,
    name: &str,
    operator: &str,
) -> Result<PrimitiveArray<T>> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_primitive_opt::<T>().cloned())
        .ok_or_else(|| Error::State {
            operator: operator.into(),
            message: format!("missing {} column `{name}`", T::DATA_TYPE),
        })
}

/// `target[groups[i]] = values[i]` for every row `i` of a state batch.
pub(super) fn set_groups<T: Copy>(target: &mut [T], groups: &[u32], values: &[T]) {
    for (&g, &v) in groups.iter().zip(values) {
        target[g as usize] = v;
    }
}

/// Counts the non-null values of `a` per group, signed.
fn count(v: &mut [i64], groups: &[u32], signs: &[i64], a: &dyn Array) {
    for (i, (&g, &s)) in groups.iter().zip(signs).enumerate() {
        if a.is_valid(i) {
            v[g as usize] += s;
        }
    }
}
