//! An accumulator set's state for snapshots: per aggregate a value column (or list of
//! distinct values) and a count, and the restore that reads them back.

use super::{AccumulatorSet, Column};
use crate::aggregate::distinct_sets::DistinctValues;
use crate::aggregate::shared_distinct::Members;
use crate::aggregate::shared_set::{SharedEntries, SharedSet};
use riffle_core::arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int64Array, Int64Builder, ListArray, ListBuilder,
    StringBuilder,
};
use riffle_core::arrow::datatypes::{DataType, Field, Float64Type, Int64Type};
use riffle_core::{Error, Result};
use std::sync::Arc;

impl AccumulatorSet {
    /// State columns of slots `groups`, for snapshots: per aggregate `{name}__value`
    /// (Int64/Float64 or a list of distinct values: all, or those `distinct` says) and
    /// `{name}__count`. From the first call on, sets note what they gain until the next.
    ///
    /// # Errors
    /// Arrow failures building lists.
    pub fn state(
        &mut self,
        groups: &[u32],
        distinct: DistinctValues,
    ) -> Result<Vec<(Field, ArrayRef)>> {
        let out = self.state_columns(groups, distinct)?;
        self.note_snapshot_taken();
        Ok(out)
    }

    /// From now on sets note what they gain, for the next snapshot's delta (a set
    /// rebuilt after a snapshot continues the chain its predecessor wrote).
    pub(crate) fn note_snapshot_taken(&mut self) {
        for column in &mut self.columns {
            match column {
                Column::DistinctInt(v) => v.snapshot_taken(),
                Column::DistinctText(v) => v.snapshot_taken(),
                _ => {}
            }
        }
        self.shared.iter_mut().for_each(SharedSet::snapshot_taken);
    }

    /// The state columns of [`state`](Self::state) without noting a snapshot: what
    /// sets gained since the last one stays noted (the spill tier's copy of groups).
    pub(crate) fn state_columns(
        &self,
        groups: &[u32],
        distinct: DistinctValues,
    ) -> Result<Vec<(Field, ArrayRef)>> {
        let mut out = Vec::new();
        // Each shared map's entries of `groups`, listed once for all its members.
        let shared_entries: Vec<std::cell::OnceCell<SharedEntries>> = self
            .shared
            .iter()
            .map(|_| std::cell::OnceCell::new())
            .collect();
        // A column of `groups`' values of one per-group vector.
        let ints = |v: &[i64]| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(
                groups.iter().map(|&g| v[g as usize]),
            ))
        };
        for (column, agg) in self.columns.iter().zip(&self.aggregates) {
            let name = agg.output.name();
            let count_field = Field::new(format!("{name}__count"), DataType::Int64, false);
            let value_field = |t| Field::new(format!("{name}__value"), t, false);
            match column {
                Column::Count(v) => out.push((count_field, ints(v))),
                Column::Int { values, seen } => {
                    out.push((value_field(DataType::Int64), ints(values)));
                    out.push((count_field, ints(seen)));
                }
                Column::Float { values, seen } => {
                    let floats = groups.iter().map(|&g| values[g as usize]);
                    out.push((
                        value_field(DataType::Float64),
                        Arc::new(Float64Array::from_iter_values(floats)),
                    ));
                    out.push((count_field, ints(seen)));
                }
                Column::DistinctInt(v) => {
                    let mut b = ListBuilder::new(Int64Builder::new());
                    for &g in groups {
                        for value in v.snapshot_values(g as usize, distinct) {
                            b.values().append_value(*value);
                        }
                        b.append(true);
                    }
                    let list = b.finish();
                    out.push((value_field(list.data_type().clone()), Arc::new(list)));
                }
                Column::Text(t) => out.push((
                    Field::new(format!("{name}__value"), DataType::Utf8, true),
                    t.finish(groups),
                )),
                Column::DistinctText(v) => {
                    let mut b = ListBuilder::new(StringBuilder::new());
                    for &g in groups {
                        for s in v.snapshot_values(g as usize, distinct) {
                            b.values().append_value(s);
                        }
                        b.append(true);
                    }
                    let list = b.finish();
                    out.push((value_field(list.data_type().clone()), Arc::new(list)));
                }
                // The same list a count DISTINCT of its own writes: a snapshot does not
                // depend on which aggregates share a map.
                Column::Shared { set, member } => {
                    let bit: Members = 1 << *member;
                    let entries = shared_entries[*set]
                        .get_or_init(|| SharedEntries::of(&self.shared[*set], groups, distinct));
                    let list: ArrayRef = match entries {
                        SharedEntries::Int(slots) => {
                            let mut b = ListBuilder::new(Int64Builder::new());
                            for entries in slots {
                                for (value, _) in entries.iter().filter(|(_, m)| m & bit != 0) {
                                    b.values().append_value(**value);
                                }
                                b.append(true);
                            }
                            Arc::new(b.finish())
                        }
                        SharedEntries::Text(slots) => {
                            let mut b = ListBuilder::new(StringBuilder::new());
                            for entries in slots {
                                for (value, _) in entries.iter().filter(|(_, m)| m & bit != 0) {
                                    b.values().append_value(value);
                                }
                                b.append(true);
                            }
                            Arc::new(b.finish())
                        }
                    };
                    out.push((value_field(list.data_type().clone()), list));
                }
            }
        }
        Ok(out)
    }

    /// Whether a group's later state row replaces its earlier ones, for every
    /// aggregate: no count DISTINCT set, whose later rows may hold only what it gained
    /// (a restore takes the union).
    pub(crate) fn later_rows_replace(&self) -> bool {
        self.shared.is_empty()
            && (self.columns.iter())
                .all(|c| !matches!(c, Column::DistinctInt(_) | Column::DistinctText(_)))
    }

    /// Restores slots `groups` from the columns [`state`](Self::state) wrote, found by
    /// name in `batch`.
    ///
    /// # Errors
    /// A state column is missing or has the wrong type.
    pub fn restore(
        &mut self,
        groups: &[u32],
        batch: &riffle_core::RecordBatch,
        operator: &str,
    ) -> Result<()> {
        let max = groups.iter().copied().max().map_or(0, |m| m as usize + 1);
        self.ensure(max);
        let missing = |c: &str| Error::State {
            operator: operator.into(),
            message: format!("missing or mistyped state column `{c}`"),
        };
        for (column, agg) in self.columns.iter_mut().zip(&self.aggregates) {
            let name = agg.output.name();
            let value_name = format!("{name}__value");
            let count_name = format!("{name}__count");
            let ints = |n: &str| {
                batch
                    .column_by_name(n)
                    .and_then(|c| c.as_primitive_opt::<Int64Type>().cloned())
                    .ok_or_else(|| missing(n))
            };
            match column {
                Column::Count(v) => {
                    let c = ints(&count_name)?;
                    for (row, &g) in groups.iter().enumerate() {
                        v[g as usize] = c.value(row);
                    }
                }
                Column::Int { values, seen } => {
                    let (val, cnt) = (ints(&value_name)?, ints(&count_name)?);
                    for (row, &g) in groups.iter().enumerate() {
                        values[g as usize] = val.value(row);
                        seen[g as usize] = cnt.value(row);
                    }
                }
                Column::Float { values, seen } => {
                    let val = batch
                        .column_by_name(&value_name)
                        .and_then(|c| c.as_primitive_opt::<Float64Type>().cloned())
                        .ok_or_else(|| missing(&value_name))?;
                    let cnt = ints(&count_name)?;
                    for (row, &g) in groups.iter().enumerate() {
                        values[g as usize] = val.value(row);
                        seen[g as usize] = cnt.value(row);
                    }
                }
                Column::DistinctInt(v) => {
                    let list = batch
                        .column_by_name(&value_name)
                        .and_then(|c| c.as_any().downcast_ref::<ListArray>())
                        .ok_or_else(|| missing(&value_name))?;
                    for (row, &g) in groups.iter().enumerate() {
                        let values = list.value(row);
                        let values = values
                            .as_primitive_opt::<Int64Type>()
                            .ok_or_else(|| missing(&value_name))?;
                        // A union: a group's later rows may hold only what it gained.
                        v.extend(g as usize, values.values().iter().copied());
                    }
                }
                Column::Text(t) => batch
                    .column_by_name(&value_name)
                    .and_then(|c| t.restore(groups, c))
                    .ok_or_else(|| missing(&value_name))?,
                Column::DistinctText(v) => {
                    let list = batch
                        .column_by_name(&value_name)
                        .and_then(|c| c.as_any().downcast_ref::<ListArray>())
                        .ok_or_else(|| missing(&value_name))?;
                    for (row, &g) in groups.iter().enumerate() {
                        let values = list.value(row);
                        let values = values
                            .as_string_opt::<i32>()
                            .ok_or_else(|| missing(&value_name))?;
                        v.extend(g as usize, values.iter().flatten().map(Into::into));
                    }
                }
                Column::Shared { set, member } => {
                    let list = batch
                        .column_by_name(&value_name)
                        .and_then(|c| c.as_any().downcast_ref::<ListArray>())
                        .ok_or_else(|| missing(&value_name))?;
                    let bit: Members = 1 << *member;
                    for (row, &g) in groups.iter().enumerate() {
                        let values = list.value(row);
                        match &mut self.shared[*set] {
                            SharedSet::Int(v) => {
                                let values = values
                                    .as_primitive_opt::<Int64Type>()
                                    .ok_or_else(|| missing(&value_name))?;
                                for x in values.values() {
                                    v.insert(g as usize, x, bit, |v| *v);
                                }
                            }
                            SharedSet::Text(v) => {
                                let values = values
                                    .as_string_opt::<i32>()
                                    .ok_or_else(|| missing(&value_name))?;
                                for x in values.iter().flatten() {
                                    v.insert(g as usize, x, bit, |s: &str| Box::from(s));
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
