//! Declared JSON columns that no record carries. The JSON reader fills a missing key
//! with NULL, so a column declared as `itemname` over records keyed `itemName` reads as
//! NULL in every row without an error. The source counts, per declared column, the
//! rows that had a value; when every subtask has read its last file, each column that
//! had none in a non-empty input is reported by name.

use riffle_core::RecordBatch;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Counts shared by a source's subtasks.
#[derive(Debug)]
pub(crate) struct ColumnPresence {
    /// Declared column names and their indices in the batches.
    columns: Vec<(String, usize)>,
    /// Rows with a value, per column.
    seen: Vec<AtomicU64>,
    rows: AtomicU64,
    finished: AtomicUsize,
}

impl ColumnPresence {
    /// Counts for `columns` (name, index in the batches).
    pub(crate) fn new(columns: Vec<(String, usize)>) -> Self {
        Self {
            seen: columns.iter().map(|_| AtomicU64::new(0)).collect(),
            columns,
            rows: AtomicU64::new(0),
            finished: AtomicUsize::new(0),
        }
    }

    /// Fresh counts for those of the columns among `read` (indices in the batches):
    /// a column not read is NULL without saying anything of the records.
    pub(crate) fn only(&self, read: &[usize]) -> Self {
        Self::new(
            self.columns
                .iter()
                .filter(|(_, index)| read.contains(index))
                .cloned()
                .collect(),
        )
    }

    /// Counts the values of a batch a subtask read.
    pub(crate) fn count(&self, batch: &RecordBatch) {
        let rows = batch.num_rows() as u64;
        self.rows.fetch_add(rows, Ordering::Relaxed);
        for ((_, index), seen) in self.columns.iter().zip(&self.seen) {
            let nulls = batch.column(*index).null_count() as u64;
            seen.fetch_add(rows - nulls, Ordering::Relaxed);
        }
    }

    /// A subtask read its last file. The last of `parallelism` subtasks to do so gets
    /// the columns without a value, and the rows read; the others get `None`.
    pub(crate) fn finish(&self, parallelism: usize) -> Option<(Vec<&str>, u64)> {
        if self.finished.fetch_add(1, Ordering::AcqRel) + 1 != parallelism {
            return None;
        }
        let rows = self.rows.load(Ordering::Acquire);
        let seen: Vec<u64> = self
            .seen
            .iter()
            .map(|s| s.load(Ordering::Acquire))
            .collect();
        let names: Vec<&str> = self.columns.iter().map(|(n, _)| n.as_str()).collect();
        Some((absent(&names, &seen, rows), rows))
    }
}

/// The columns that had no value in `rows` rows (none when nothing was read).
fn absent<'a>(columns: &[&'a str], seen: &[u64], rows: u64) -> Vec<&'a str> {
    if rows == 0 {
        return Vec::new();
    }
    columns
        .iter()
        .zip(seen)
        .filter(|(_, &n)| n == 0)
        .map(|(c, _)| *c)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::Int64Array;
    use riffle_core::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    #[test]
    fn a_column_null_in_every_row_is_absent_and_an_empty_input_reports_nothing() {
        assert_eq!(absent(&["a", "b"], &[3, 0], 3), ["b"]);
        assert!(absent(&["a", "b"], &[0, 0], 0).is_empty());
    }

    #[test]
    fn only_the_last_subtask_to_finish_reports() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, true),
            Field::new("b", DataType::Int64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![Some(1), None])),
                Arc::new(Int64Array::from(vec![None, None])),
            ],
        )
        .unwrap();
        let presence = ColumnPresence::new(vec![("a".into(), 0), ("b".into(), 1)]);
        presence.count(&batch);
        assert!(presence.finish(2).is_none());
        assert_eq!(presence.finish(2), Some((vec!["b"], 2)));
    }
}
