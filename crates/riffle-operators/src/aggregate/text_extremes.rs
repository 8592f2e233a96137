//! `min`/`max` of strings per group: the smallest or largest value by byte order (the
//! order of Unicode code points), NULL for a group that saw no value.

use riffle_core::arrow::array::{Array, ArrayRef, AsArray, StringArray};
use riffle_core::arrow::compute::cast;
use riffle_core::arrow::datatypes::DataType;
use std::sync::Arc;

/// One `min` or `max` of strings, one slot per group.
#[derive(Debug, Default)]
pub(crate) struct TextExtremes {
    values: Vec<Option<Box<str>>>,
    /// `max` when true, `min` otherwise.
    max: bool,
}

impl TextExtremes {
    /// The bytes the values hold.
    pub(crate) fn memory_size(&self) -> usize {
        self.values.capacity() * 16 + self.values.iter().flatten().map(|v| v.len()).sum::<usize>()
    }

    pub(crate) fn new(max: bool) -> Self {
        Self {
            values: Vec::new(),
            max,
        }
    }

    pub(crate) fn resize(&mut self, groups: usize) {
        self.values.resize(groups, None);
    }

    pub(crate) fn reset(&mut self, group: usize) {
        self.values[group] = None;
    }

    /// Whether `candidate` replaces `current`.
    fn wins(&self, current: Option<&str>, candidate: &str) -> bool {
        match current {
            None => true,
            Some(c) if self.max => candidate > c,
            Some(c) => candidate < c,
        }
    }

    fn offer(&mut self, group: usize, candidate: &str) {
        if self.wins(self.values[group].as_deref(), candidate) {
            self.values[group] = Some(candidate.into());
        }
    }

    /// Adds row `rows[i]` of `input` to group `groups[i]`.
    pub(crate) fn update(&mut self, groups: &[u32], rows: &[u32], input: &ArrayRef) {
        let input = cast(input, &DataType::Utf8).unwrap_or_else(|_| input.clone());
        let s = input.as_string::<i32>();
        for (&g, &r) in groups.iter().zip(rows) {
            if s.is_valid(r as usize) {
                self.offer(g as usize, s.value(r as usize));
            }
        }
    }

    /// Folds slot `src` into slot `dst`.
    pub(crate) fn merge(&mut self, dst: usize, src: usize) {
        if let Some(v) = self.values[src].take() {
            self.offer(dst, &v);
        }
    }

    /// Folds slot `s` of `other` into slot `d` for every `(s, d)`.
    pub(crate) fn merge_from(
        &mut self,
        other: &TextExtremes,
        pairs: impl Iterator<Item = (usize, usize)>,
    ) {
        for (s, d) in pairs {
            if let Some(v) = other.values[s].as_deref() {
                self.offer(d, v);
            }
        }
    }

    /// The values of slots `groups` (also their snapshot column).
    pub(crate) fn finish(&self, groups: &[u32]) -> ArrayRef {
        Arc::new(StringArray::from_iter(
            groups.iter().map(|&g| self.values[g as usize].as_deref()),
        ))
    }

    /// Restores slots `groups` from a column [`finish`](Self::finish) wrote; `None` when
    /// it is not a string column.
    pub(crate) fn restore(&mut self, groups: &[u32], column: &ArrayRef) -> Option<()> {
        let s = column.as_string_opt::<i32>()?;
        for (row, &g) in groups.iter().enumerate() {
            self.values[g as usize] = s.is_valid(row).then(|| s.value(row).into());
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_and_min_of_strings_skip_nulls() {
        let input: ArrayRef = Arc::new(StringArray::from(vec![
            Some("23:59"),
            None,
            Some("00:01"),
            Some("12:00"),
        ]));
        let mut max = TextExtremes::new(true);
        let mut min = TextExtremes::new(false);
        for t in [&mut max, &mut min] {
            t.resize(2);
            t.update(&[0, 0, 0, 0], &[0, 1, 2, 3], &input);
        }
        let max = max.finish(&[0, 1]);
        let max = max.as_string::<i32>();
        assert_eq!(max.value(0), "23:59");
        assert!(max.is_null(1), "a group without values is NULL");
        assert_eq!(min.finish(&[0]).as_string::<i32>().value(0), "00:01");
    }
}
