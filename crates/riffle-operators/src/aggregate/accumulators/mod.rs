//! Columnar accumulators: one vector per aggregate, indexed by group id. Their state
//! columns for snapshots are in `state.rs`.

mod state;

use super::distinct_sets::DistinctSets;
use super::inputs::{normalize_inputs, shared_columns, Input, Inputs};
use super::shared_distinct::SharedDistinct;
use super::shared_set::SharedSet;
use super::text_extremes::TextExtremes;
use super::{AggregateFunction, BoundAggregate, NumericKind};
use riffle_core::arrow::array::{Array, ArrayRef, AsArray, Float64Array, Int64Array};
use riffle_core::arrow::compute::cast;
use riffle_core::arrow::datatypes::DataType;
use riffle_core::Result;
use std::sync::Arc;

enum Column {
    /// Count of rows (count(*)) or of non-null values (count(col)).
    Count(Vec<i64>),
    /// Integer sum/min/max with the count of non-null inputs (0 → null result).
    Int { values: Vec<i64>, seen: Vec<i64> },
    /// Float sum/min/max/avg with the count of non-null inputs.
    Float { values: Vec<f64>, seen: Vec<i64> },
    /// Distinct integer values.
    DistinctInt(DistinctSets<i64>),
    /// Distinct strings.
    DistinctText(DistinctSets<Box<str>>),
    /// min/max of strings.
    Text(TextExtremes),
    /// Member `member` of shared set `set` (count DISTINCT over a column that another
    /// count DISTINCT also reads).
    Shared { set: usize, member: usize },
}

/// Accumulators of several aggregates for many groups.
pub struct AccumulatorSet {
    aggregates: Vec<BoundAggregate>,
    columns: Vec<Column>,
    shared: Vec<SharedSet>,
    groups: usize,
}

impl AccumulatorSet {
    pub(crate) fn new(aggregates: &[BoundAggregate]) -> Self {
        use AggregateFunction as F;
        let layout = shared_columns(aggregates);
        let member_of = |i: usize| {
            layout.iter().enumerate().find_map(|(set, s)| {
                let member = s.members.iter().position(|&m| m == i)?;
                Some(Column::Shared { set, member })
            })
        };
        let shared = layout
            .iter()
            .map(|s| match s.kind {
                NumericKind::Text => SharedSet::Text(SharedDistinct::new(s.members.len())),
                _ => SharedSet::Int(SharedDistinct::new(s.members.len())),
            })
            .collect();
        let columns = aggregates
            .iter()
            .enumerate()
            .map(|(i, a)| {
                member_of(i).unwrap_or_else(|| match (a.function, a.kind) {
                    (F::CountStar | F::Count, _) => Column::Count(Vec::new()),
                    (F::CountDistinct, NumericKind::Text) => {
                        Column::DistinctText(DistinctSets::new())
                    }
                    (F::CountDistinct, _) => Column::DistinctInt(DistinctSets::new()),
                    (F::Min | F::Max, NumericKind::Text) => {
                        Column::Text(TextExtremes::new(a.function == F::Max))
                    }
                    (F::Avg, _) | (_, NumericKind::Float) => Column::Float {
                        values: Vec::new(),
                        seen: Vec::new(),
                    },
                    _ => Column::Int {
                        values: Vec::new(),
                        seen: Vec::new(),
                    },
                })
            })
            .collect();
        Self {
            aggregates: aggregates.to_vec(),
            columns,
            shared,
            groups: 0,
        }
    }

    /// Number of group slots.
    pub fn len(&self) -> usize {
        self.groups
    }

    /// Whether there are no slots.
    pub fn is_empty(&self) -> bool {
        self.groups == 0
    }

    fn identity(function: AggregateFunction) -> (i64, f64) {
        match function {
            AggregateFunction::Min => (i64::MAX, f64::INFINITY),
            AggregateFunction::Max => (i64::MIN, f64::NEG_INFINITY),
            _ => (0, 0.0),
        }
    }

    /// Makes sure slots `0..groups` exist.
    pub fn ensure(&mut self, groups: usize) {
        if groups <= self.groups {
            return;
        }
        for (column, agg) in self.columns.iter_mut().zip(&self.aggregates) {
            let (i, f) = Self::identity(agg.function);
            match column {
                Column::Count(v) => v.resize(groups, 0),
                Column::Int { values, seen } => {
                    values.resize(groups, i);
                    seen.resize(groups, 0);
                }
                Column::Float { values, seen } => {
                    values.resize(groups, f);
                    seen.resize(groups, 0);
                }
                Column::DistinctInt(v) => v.resize(groups),
                Column::DistinctText(v) => v.resize(groups),
                Column::Text(t) => t.resize(groups),
                Column::Shared { .. } => {}
            }
        }
        self.shared.iter_mut().for_each(|s| s.resize(groups));
        self.groups = groups;
    }

    /// About the bytes the accumulators hold (exact for fixed-size values, estimated
    /// for sets and strings).
    pub fn memory_size(&self) -> usize {
        let columns: usize = (self.columns.iter())
            .map(|c| match c {
                Column::Count(v) => v.capacity() * 8,
                Column::Int { values, seen } => (values.capacity() + seen.capacity()) * 8,
                Column::Float { values, seen } => (values.capacity() + seen.capacity()) * 8,
                Column::DistinctInt(v) => v.memory_size(0),
                Column::DistinctText(v) => v.memory_size(super::shared_set::TEXT_HEAP),
                Column::Text(t) => t.memory_size(),
                Column::Shared { .. } => 0,
            })
            .sum();
        columns
            + self
                .shared
                .iter()
                .map(SharedSet::memory_size)
                .sum::<usize>()
    }

    /// Resets slot `group` to the empty state (for reuse).
    pub fn reset(&mut self, group: u32) {
        let g = group as usize;
        for (column, agg) in self.columns.iter_mut().zip(&self.aggregates) {
            let (i, f) = Self::identity(agg.function);
            match column {
                Column::Count(v) => v[g] = 0,
                Column::Int { values, seen } => {
                    values[g] = i;
                    seen[g] = 0;
                }
                Column::Float { values, seen } => {
                    values[g] = f;
                    seen[g] = 0;
                }
                Column::DistinctInt(v) => v.clear(g),
                Column::DistinctText(v) => v.clear(g),
                Column::Text(t) => t.reset(g),
                Column::Shared { .. } => {}
            }
        }
        self.shared.iter_mut().for_each(|s| s.clear(g));
    }

    /// Normalises this batch's input columns.
    pub(crate) fn inputs(&self, columns: &[ArrayRef]) -> Result<Inputs> {
        normalize_inputs(&self.aggregates, columns)
    }

    /// Adds row `rows[i]` of `inputs` to group `groups[i]` for every `i`.
    pub(crate) fn update(&mut self, groups: &[u32], rows: &[u32], inputs: &Inputs) {
        let max = groups.iter().copied().max().map_or(0, |m| m as usize + 1);
        self.ensure(max);
        for (set, input) in self.shared.iter_mut().zip(&inputs.shared) {
            set.update(groups, rows, &input.values, &input.filters);
        }
        for ((column, agg), input) in self
            .columns
            .iter_mut()
            .zip(&self.aggregates)
            .zip(&inputs.values)
        {
            let f = agg.function;
            match (column, input) {
                (Column::Count(counts), Input::None) => {
                    for &g in groups {
                        counts[g as usize] += 1;
                    }
                }
                (Column::Count(counts), input) => {
                    let nulls = match input {
                        Input::Int(a) => a.logical_nulls(),
                        Input::Float(a) => a.logical_nulls(),
                        Input::Text(a) => a.logical_nulls(),
                        Input::None => None,
                    };
                    for (&g, &r) in groups.iter().zip(rows) {
                        if nulls.as_ref().is_none_or(|n| n.is_valid(r as usize)) {
                            counts[g as usize] += 1;
                        }
                    }
                }
                (Column::Int { values, seen }, Input::Int(a)) => {
                    let v = a.values();
                    for (&g, &r) in groups.iter().zip(rows) {
                        let (g, r) = (g as usize, r as usize);
                        if a.is_null(r) {
                            continue;
                        }
                        seen[g] += 1;
                        values[g] = match f {
                            AggregateFunction::Min => values[g].min(v[r]),
                            AggregateFunction::Max => values[g].max(v[r]),
                            _ => values[g].wrapping_add(v[r]),
                        };
                    }
                }
                (Column::Float { values, seen }, input) => {
                    let (v, valid): (Vec<f64>, Option<_>) = match input {
                        Input::Float(a) => (a.values().to_vec(), a.logical_nulls()),
                        Input::Int(a) => (
                            a.values().iter().map(|x| *x as f64).collect(),
                            a.logical_nulls(),
                        ),
                        _ => continue,
                    };
                    for (&g, &r) in groups.iter().zip(rows) {
                        let (g, r) = (g as usize, r as usize);
                        if valid.as_ref().is_some_and(|n| n.is_null(r)) {
                            continue;
                        }
                        seen[g] += 1;
                        values[g] = match f {
                            AggregateFunction::Min => values[g].min(v[r]),
                            AggregateFunction::Max => values[g].max(v[r]),
                            _ => values[g] + v[r],
                        };
                    }
                }
                (Column::DistinctInt(sets), Input::Int(a)) => {
                    for (&g, &r) in groups.iter().zip(rows) {
                        if a.is_valid(r as usize) {
                            sets.insert(g as usize, a.value(r as usize));
                        }
                    }
                }
                (Column::Text(t), Input::Text(a)) => t.update(groups, rows, a),
                (Column::DistinctText(sets), Input::Text(a)) => {
                    let a = cast(a, &DataType::Utf8).unwrap_or_else(|_| a.clone());
                    let s = a.as_string::<i32>();
                    for (&g, &r) in groups.iter().zip(rows) {
                        if s.is_valid(r as usize) {
                            sets.insert(g as usize, s.value(r as usize).into());
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// Folds slot `src` into slot `dst` (session merges).
    pub fn merge(&mut self, dst: u32, src: u32) {
        let (d, s) = (dst as usize, src as usize);
        for (column, agg) in self.columns.iter_mut().zip(&self.aggregates) {
            match column {
                Column::Count(v) => v[d] += v[s],
                Column::Int { values, seen } => {
                    (values[d], seen[d]) =
                        fold_int(agg.function, (values[d], seen[d]), (values[s], seen[s]));
                }
                Column::Float { values, seen } => {
                    (values[d], seen[d]) =
                        fold_float(agg.function, (values[d], seen[d]), (values[s], seen[s]));
                }
                Column::DistinctInt(v) => {
                    let moved = v.take(s);
                    v.extend(d, moved);
                }
                Column::DistinctText(v) => {
                    let moved = v.take(s);
                    v.extend(d, moved);
                }
                Column::Text(t) => t.merge(d, s),
                Column::Shared { .. } => {}
            }
        }
        self.shared
            .iter_mut()
            .for_each(|set| set.merge_slot(d, None, s));
    }

    /// Folds slot `src[i]` of `other` (same aggregates) into slot `dst[i]` of this set,
    /// for every `i`; `other` is unchanged (hopping windows merge their panes).
    pub fn merge_from(&mut self, other: &AccumulatorSet, src: &[u32], dst: &[u32]) {
        let max = dst.iter().copied().max().map_or(0, |m| m as usize + 1);
        self.ensure(max);
        let pairs = || src.iter().zip(dst).map(|(&s, &d)| (s as usize, d as usize));
        for ((column, agg), theirs) in self
            .columns
            .iter_mut()
            .zip(&self.aggregates)
            .zip(&other.columns)
        {
            let f = agg.function;
            match (column, theirs) {
                (Column::Count(v), Column::Count(o)) => pairs().for_each(|(s, d)| v[d] += o[s]),
                (
                    Column::Int { values, seen },
                    Column::Int {
                        values: ov,
                        seen: os,
                    },
                ) => fold_pairs((values, seen), (ov, os), pairs(), |a, b| fold_int(f, a, b)),
                (
                    Column::Float { values, seen },
                    Column::Float {
                        values: ov,
                        seen: os,
                    },
                ) => fold_pairs((values, seen), (ov, os), pairs(), |a, b| {
                    fold_float(f, a, b)
                }),
                (Column::DistinctInt(v), Column::DistinctInt(o)) => {
                    pairs().for_each(|(s, d)| v.extend(d, o.values(s).copied()))
                }
                (Column::DistinctText(v), Column::DistinctText(o)) => {
                    pairs().for_each(|(s, d)| v.extend(d, o.values(s).cloned()))
                }
                (Column::Text(t), Column::Text(o)) => t.merge_from(o, pairs()),
                _ => {}
            }
        }
        for (set, theirs) in self.shared.iter_mut().zip(&other.shared) {
            pairs().for_each(|(s, d)| set.merge_slot(d, Some(theirs), s));
        }
    }

    /// The aggregate results of slots `groups`, one array per aggregate.
    ///
    /// # Errors
    /// Casting a min/max back to its input type failed.
    pub fn finish(&self, groups: &[u32]) -> Result<Vec<ArrayRef>> {
        let mut out = Vec::with_capacity(self.columns.len());
        for (column, agg) in self.columns.iter().zip(&self.aggregates) {
            let array: ArrayRef = match column {
                Column::Count(v) => Arc::new(Int64Array::from_iter_values(
                    groups.iter().map(|&g| v[g as usize]),
                )),
                Column::Int { values, seen } => Arc::new(Int64Array::from_iter(
                    groups
                        .iter()
                        .map(|&g| (seen[g as usize] > 0).then_some(values[g as usize])),
                )),
                Column::Float { values, seen } => {
                    Arc::new(Float64Array::from_iter(groups.iter().map(|&g| {
                        let g = g as usize;
                        (seen[g] > 0).then(|| {
                            if agg.function == AggregateFunction::Avg {
                                values[g] / seen[g] as f64
                            } else {
                                values[g]
                            }
                        })
                    })))
                }
                Column::DistinctInt(v) => Arc::new(Int64Array::from_iter_values(
                    groups.iter().map(|&g| v.len(g as usize) as i64),
                )),
                Column::DistinctText(v) => Arc::new(Int64Array::from_iter_values(
                    groups.iter().map(|&g| v.len(g as usize) as i64),
                )),
                Column::Text(t) => t.finish(groups),
                Column::Shared { set, member } => Arc::new(Int64Array::from_iter_values(
                    groups
                        .iter()
                        .map(|&g| self.shared[*set].count(g as usize, *member)),
                )),
            };
            let target = agg.output.data_type();
            out.push(if array.data_type() == target {
                array
            } else {
                cast(&array, target)?
            });
        }
        Ok(out)
    }
}

/// An integer sum/min/max `(value, non-null count)` folded with another.
/// Folds slot `s` of `theirs` into slot `d` of `ours` for every `(s, d)` pair, by `fold`
/// over (value, rows seen).
fn fold_pairs<T: Copy>(
    ours: (&mut [T], &mut [i64]),
    theirs: (&[T], &[i64]),
    pairs: impl Iterator<Item = (usize, usize)>,
    fold: impl Fn((T, i64), (T, i64)) -> (T, i64),
) {
    let ((values, seen), (ov, os)) = (ours, theirs);
    for (s, d) in pairs {
        (values[d], seen[d]) = fold((values[d], seen[d]), (ov[s], os[s]));
    }
}

fn fold_int(function: AggregateFunction, acc: (i64, i64), other: (i64, i64)) -> (i64, i64) {
    if other.1 == 0 {
        return acc;
    }
    let value = match (function, acc.1) {
        (_, 0) => other.0,
        (AggregateFunction::Min, _) => acc.0.min(other.0),
        (AggregateFunction::Max, _) => acc.0.max(other.0),
        _ => acc.0.wrapping_add(other.0),
    };
    (value, acc.1 + other.1)
}

/// A float sum/min/max/avg `(value, non-null count)` folded with another.
fn fold_float(function: AggregateFunction, acc: (f64, i64), other: (f64, i64)) -> (f64, i64) {
    if other.1 == 0 {
        return acc;
    }
    let value = match (function, acc.1) {
        (_, 0) => other.0,
        (AggregateFunction::Min, _) => acc.0.min(other.0),
        (AggregateFunction::Max, _) => acc.0.max(other.0),
        _ => acc.0 + other.0,
    };
    (value, acc.1 + other.1)
}
