//! The typed side of [`SharedDistinct`]: a map of integers or of strings, fed a batch's
//! rows with each member's filter, merged slot by slot, and listed for a snapshot.

use super::distinct_sets::DistinctValues;
use super::inputs::Input;
use super::shared_distinct::{Members, SharedDistinct};
use riffle_core::arrow::array::{Array, AsArray, BooleanArray};
use riffle_core::arrow::compute::cast;
use riffle_core::arrow::datatypes::DataType;

/// The heap bytes a distinct string is taken to hold beyond its pointer, in memory
/// estimates (measuring every string would cost more than the estimate is worth).
pub(super) const TEXT_HEAP: usize = 24;

/// The values of several count DISTINCT aggregates over one column.
pub(super) enum SharedSet {
    Int(SharedDistinct<i64>),
    Text(SharedDistinct<Box<str>>),
}

impl SharedSet {
    pub(super) fn resize(&mut self, slots: usize) {
        match self {
            SharedSet::Int(s) => s.resize(slots),
            SharedSet::Text(s) => s.resize(slots),
        }
    }

    pub(super) fn clear(&mut self, slot: usize) {
        match self {
            SharedSet::Int(s) => s.clear(slot),
            SharedSet::Text(s) => s.clear(slot),
        }
    }

    pub(super) fn memory_size(&self) -> usize {
        match self {
            SharedSet::Int(s) => s.memory_size(0),
            SharedSet::Text(s) => s.memory_size(TEXT_HEAP),
        }
    }

    pub(super) fn count(&self, slot: usize, member: usize) -> i64 {
        match self {
            SharedSet::Int(s) => s.count(slot, member),
            SharedSet::Text(s) => s.count(slot, member),
        }
    }

    pub(super) fn snapshot_taken(&mut self) {
        match self {
            SharedSet::Int(s) => s.snapshot_taken(),
            SharedSet::Text(s) => s.snapshot_taken(),
        }
    }

    /// Adds row `rows[i]` of `values` to slot `groups[i]`, for the members whose filter
    /// passes it.
    pub(super) fn update(
        &mut self,
        groups: &[u32],
        rows: &[u32],
        values: &Input,
        filters: &[Option<BooleanArray>],
    ) {
        let mask = |r: usize| -> Members {
            filters.iter().enumerate().fold(0, |mask, (m, f)| {
                if f.as_ref().is_none_or(|f| f.value(r)) {
                    mask | 1 << m
                } else {
                    mask
                }
            })
        };
        match (self, values) {
            (SharedSet::Int(s), Input::Int(a)) => {
                for (&g, &r) in groups.iter().zip(rows) {
                    let r = r as usize;
                    match mask(r) {
                        0 => {}
                        _ if a.is_null(r) => {}
                        m => s.insert(g as usize, &a.value(r), m, |v| *v),
                    }
                }
            }
            (SharedSet::Text(s), Input::Text(a)) => {
                let a = cast(a, &DataType::Utf8).unwrap_or_else(|_| a.clone());
                let a = a.as_string::<i32>();
                for (&g, &r) in groups.iter().zip(rows) {
                    let r = r as usize;
                    match mask(r) {
                        0 => {}
                        _ if a.is_null(r) => {}
                        m => s.insert(g as usize, a.value(r), m, |s: &str| Box::from(s)),
                    }
                }
            }
            _ => {}
        }
    }

    /// Folds slot `src` of `other` into slot `dst` (the same set, or another one of
    /// the same shape).
    pub(super) fn merge_slot(&mut self, dst: usize, other: Option<&SharedSet>, src: usize) {
        match (self, other) {
            (SharedSet::Int(s), None) => {
                for (v, m) in s.take(src) {
                    s.insert(dst, &v, m, |v| *v);
                }
            }
            (SharedSet::Text(s), None) => {
                for (v, m) in s.take(src) {
                    s.insert(dst, v.as_ref(), m, |s: &str| Box::from(s));
                }
            }
            (SharedSet::Int(s), Some(SharedSet::Int(o))) => {
                for (v, m) in o.values(src) {
                    s.insert(dst, v, m, |v| *v);
                }
            }
            (SharedSet::Text(s), Some(SharedSet::Text(o))) => {
                for (v, m) in o.values(src) {
                    s.insert(dst, v.as_ref(), m, |s: &str| Box::from(s));
                }
            }
            _ => {}
        }
    }
}

/// A shared map's snapshot entries (value and members) per group being written.
pub(super) enum SharedEntries<'a> {
    Int(Vec<Vec<(&'a i64, Members)>>),
    Text(Vec<Vec<(&'a str, Members)>>),
}

impl<'a> SharedEntries<'a> {
    pub(super) fn of(set: &'a SharedSet, groups: &[u32], which: DistinctValues) -> Self {
        match set {
            SharedSet::Int(s) => SharedEntries::Int(
                groups
                    .iter()
                    .map(|&g| s.snapshot_entries(g as usize, which))
                    .collect(),
            ),
            SharedSet::Text(s) => SharedEntries::Text(
                groups
                    .iter()
                    .map(|&g| {
                        let entries = s.snapshot_entries(g as usize, which);
                        entries.into_iter().map(|(v, m)| (v.as_ref(), m)).collect()
                    })
                    .collect(),
            ),
        }
    }
}
