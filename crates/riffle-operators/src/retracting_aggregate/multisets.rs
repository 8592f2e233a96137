//! `min`, `max` and `count(DISTINCT …)` over rows that can be withdrawn: each group
//! keeps the multiset of its values (value → how many rows hold it), so a withdrawn
//! extreme gives way to the next value and a value counts while any row holds it.
//! Snapshots write a group's multiset as two list columns, values and counts.

use crate::aggregate::{Input, NumericKind};
use riffle_core::arrow::array::{
    Array, ArrayBuilder, ArrayRef, AsArray, Float64Array, Float64Builder, Int64Array, Int64Builder,
    ListArray, ListBuilder, StringArray, StringBuilder,
};
use riffle_core::arrow::compute::cast;
use riffle_core::arrow::datatypes::{DataType, Field, Float64Type, Int64Type};
use riffle_core::{Error, RecordBatch, Result};
use std::cmp::Ordering;
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A value, ordered as `min`/`max` order it (floats by IEEE total order).
#[derive(Debug, Clone)]
enum Value {
    Int(i64),
    Float(f64),
    Text(Box<str>),
}

impl Ord for Value {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Value::Int(a), Value::Int(b)) => a.cmp(b),
            (Value::Float(a), Value::Float(b)) => a.total_cmp(b),
            (Value::Text(a), Value::Text(b)) => a.cmp(b),
            // One multiset holds values of one kind; any order will do otherwise.
            (a, b) => a.rank().cmp(&b.rank()),
        }
    }
}

impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Value {}

impl Value {
    fn rank(&self) -> u8 {
        match self {
            Value::Int(_) => 0,
            Value::Float(_) => 1,
            Value::Text(_) => 2,
        }
    }
}

/// What a multiset answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    Min,
    Max,
    /// How many distinct values.
    Distinct,
}

/// One `min`, `max` or `count(DISTINCT …)` aggregate over all groups.
#[derive(Debug)]
pub(crate) struct Multisets {
    kind: NumericKind,
    answer: Answer,
    /// The aggregate's output type (the input's); values are kept widened.
    output: DataType,
    groups: Vec<BTreeMap<Value, i64>>,
}

impl Multisets {
    pub(crate) fn new(kind: NumericKind, answer: Answer, output: DataType) -> Self {
        Self {
            kind,
            answer,
            output,
            groups: Vec::new(),
        }
    }

    pub(crate) fn reserve(&mut self, groups: usize) {
        if self.groups.len() < groups {
            self.groups.resize_with(groups, BTreeMap::new);
        }
    }

    /// Adds (`sign` 1) or takes back (-1) row `i`'s value into group `groups[i]`.
    ///
    /// # Errors
    /// A value taken back that the group does not hold.
    pub(crate) fn apply(&mut self, input: &Input, groups: &[u32], signs: &[i64]) -> Result<()> {
        for (i, (&g, &s)) in groups.iter().zip(signs).enumerate() {
            let value = match input {
                Input::Int(a) if a.is_valid(i) => Value::Int(a.value(i)),
                Input::Float(a) if a.is_valid(i) => Value::Float(a.value(i)),
                Input::Text(a) if a.is_valid(i) => Value::Text(text_at(a, i)?.into()),
                _ => continue, // NULL: not part of min/max
            };
            let never_added = || {
                Error::plan(
                    "a withdrawn value was never added to its group: the input is not a changelog of this query",
                )
            };
            match self.groups[g as usize].entry(value) {
                Entry::Occupied(mut e) => {
                    *e.get_mut() += s;
                    match (*e.get()).cmp(&0) {
                        Ordering::Greater => {}
                        Ordering::Equal => {
                            e.remove();
                        }
                        Ordering::Less => return Err(never_added()),
                    }
                }
                Entry::Vacant(e) if s > 0 => {
                    e.insert(s);
                }
                Entry::Vacant(_) => return Err(never_added()),
            }
        }
        Ok(())
    }

    /// The answer for each of `groups`: the least or greatest value (NULL for an empty
    /// group), or how many distinct values it holds.
    pub(crate) fn finish(&self, groups: &[u32]) -> Result<ArrayRef> {
        if self.answer == Answer::Distinct {
            return Ok(Arc::new(Int64Array::from_iter_values(
                groups.iter().map(|&g| self.groups[g as usize].len() as i64),
            )));
        }
        let extreme = |g: &u32| {
            let set = &self.groups[*g as usize];
            if self.answer == Answer::Max {
                set.keys().next_back()
            } else {
                set.keys().next()
            }
        };
        let wide: ArrayRef = match self.kind {
            NumericKind::Int => Arc::new(Int64Array::from_iter(groups.iter().map(
                |g| match extreme(g) {
                    Some(Value::Int(v)) => Some(*v),
                    _ => None,
                },
            ))),
            NumericKind::Float => {
                Arc::new(Float64Array::from_iter(groups.iter().map(
                    |g| match extreme(g) {
                        Some(Value::Float(v)) => Some(*v),
                        _ => None,
                    },
                )))
            }
            NumericKind::Text => Arc::new(StringArray::from_iter(groups.iter().map(
                |g| match extreme(g) {
                    Some(Value::Text(v)) => Some(v.to_string()),
                    _ => None,
                },
            ))),
        };
        Ok(cast(&wide, &self.output)?)
    }

    /// The multisets of `groups` as `{name}__values` and `{name}__counts` lists.
    pub(crate) fn state(&self, name: &str, groups: &[u32]) -> Vec<(Field, ArrayRef)> {
        let (values, counts) = match self.kind {
            NumericKind::Int => self.lists(groups, Int64Builder::new(), |b, v| match v {
                Value::Int(v) => {
                    b.append_value(*v);
                    true
                }
                _ => false,
            }),
            NumericKind::Float => self.lists(groups, Float64Builder::new(), |b, v| match v {
                Value::Float(v) => {
                    b.append_value(*v);
                    true
                }
                _ => false,
            }),
            NumericKind::Text => self.lists(groups, StringBuilder::new(), |b, v| match v {
                Value::Text(v) => {
                    b.append_value(v);
                    true
                }
                _ => false,
            }),
        };
        vec![
            (
                Field::new(format!("{name}__values"), values.data_type().clone(), false),
                values,
            ),
            (
                Field::new(format!("{name}__counts"), counts.data_type().clone(), false),
                counts,
            ),
        ]
    }

    /// The multisets of `groups` as a list of values (each appended to `builder` by
    /// `append`, which says whether it took the value) and a list of their counts.
    fn lists<B: ArrayBuilder>(
        &self,
        groups: &[u32],
        builder: B,
        append: impl Fn(&mut B, &Value) -> bool,
    ) -> (ArrayRef, ArrayRef) {
        let mut values = ListBuilder::new(builder);
        let mut counts = ListBuilder::new(Int64Builder::new());
        for &g in groups {
            for (v, n) in &self.groups[g as usize] {
                if append(values.values(), v) {
                    counts.values().append_value(*n);
                }
            }
            values.append(true);
            counts.append(true);
        }
        (Arc::new(values.finish()), Arc::new(counts.finish()))
    }

    /// Sets `groups` to the multisets in `batch`'s rows.
    pub(crate) fn restore(
        &mut self,
        name: &str,
        groups: &[u32],
        batch: &RecordBatch,
        operator: &str,
    ) -> Result<()> {
        let list = |column: String| -> Result<ListArray> {
            batch
                .column_by_name(&column)
                .and_then(|c| c.as_list_opt::<i32>().cloned())
                .ok_or_else(|| Error::State {
                    operator: operator.into(),
                    message: format!("missing list column `{column}`"),
                })
        };
        let (values, counts) = (
            list(format!("{name}__values"))?,
            list(format!("{name}__counts"))?,
        );
        for (row, &g) in groups.iter().enumerate() {
            let (v, n) = (values.value(row), counts.value(row));
            let n = n.as_primitive::<Int64Type>();
            let mut set = BTreeMap::new();
            for i in 0..v.len() {
                let value = match self.kind {
                    NumericKind::Int => Value::Int(v.as_primitive::<Int64Type>().value(i)),
                    NumericKind::Float => Value::Float(v.as_primitive::<Float64Type>().value(i)),
                    NumericKind::Text => Value::Text(v.as_string::<i32>().value(i).into()),
                };
                set.insert(value, n.value(i));
            }
            self.groups[g as usize] = set;
        }
        Ok(())
    }
}

/// The text at row `i` of a string column of any string type.
fn text_at(a: &ArrayRef, i: usize) -> Result<&str> {
    match a.data_type() {
        DataType::Utf8 => Ok(a.as_string::<i32>().value(i)),
        DataType::LargeUtf8 => Ok(a.as_string::<i64>().value(i)),
        DataType::Utf8View => Ok(a.as_string_view().value(i)),
        t => Err(Error::plan(format!("min/max of {t} is not text"))),
    }
}
