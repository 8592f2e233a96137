//! The row groups of a Parquet split that a reader reads, when a time range lets some be
//! passed over (see `SourceFactory::reading_times_within`), and where in the split the
//! reader is.
//!
//! A position stays a count of the split's rows, passed-over ones included, so a
//! checkpoint means the same row whatever range the next run prunes with (or none): a
//! restore resumes at the same row, and no row is read twice or lost between two runs
//! that prune differently.

use crate::decode::utc_unit_cast;
use riffle_core::arrow::array::{Array, ArrayRef, AsArray};
use riffle_core::arrow::compute::kernels::cast::CastOptions;
use riffle_core::arrow::datatypes::{Schema, TimestampNanosecondType};
use riffle_core::parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use riffle_core::parquet::file::metadata::ParquetMetaData;
use riffle_core::parquet::schema::types::SchemaDescriptor;
use riffle_core::{timestamp_type, TimeBounds};

/// One row group of a split: its index in the file, its first row among the split's
/// rows, its row count, and whether it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Group {
    index: usize,
    first: u64,
    rows: u64,
    kept: bool,
}

/// The row groups of one split, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SplitGroups {
    groups: Vec<Group>,
}

impl SplitGroups {
    /// Row groups `first_index, first_index + 1, …` with `rows` rows each, read where
    /// `kept` says.
    pub(super) fn new(first_index: usize, rows: &[u64], kept: &[bool]) -> Self {
        let mut first = 0;
        let groups = rows
            .iter()
            .zip(kept)
            .enumerate()
            .map(|(i, (&rows, &kept))| {
                let group = Group {
                    index: first_index + i,
                    first,
                    rows,
                    kept,
                };
                first += rows;
                group
            })
            .collect();
        Self { groups }
    }

    /// What a reader opened at `position` reads: the kept row groups not yet passed
    /// (file indices), and how many rows of the first of them were read already.
    pub(super) fn resume(&self, position: u64) -> (Vec<usize>, u64) {
        let ahead: Vec<&Group> = self
            .groups
            .iter()
            .filter(|g| g.kept && g.first + g.rows > position)
            .collect();
        let offset = ahead
            .first()
            .map_or(0, |g| position.saturating_sub(g.first));
        (ahead.iter().map(|g| g.index).collect(), offset)
    }

    /// The split rows (0-based) of the next `n` rows a reader at `position` hands out.
    pub(super) fn next_rows(&self, position: u64, n: usize) -> Vec<u64> {
        let mut rows = Vec::new();
        for g in self.groups.iter().filter(|g| g.kept) {
            let start = position.max(g.first);
            let end = g.first + g.rows;
            let take = (end.saturating_sub(start)).min((n - rows.len()) as u64);
            rows.extend(start..start + take);
            if rows.len() == n {
                break;
            }
        }
        rows
    }
}

/// Which of row groups `groups` may hold a value of column `column` (an index into the
/// file's Arrow schema) within `bounds`, by the groups' min/max statistics. A group
/// without statistics, or a column that is not a timestamp, is kept.
pub(super) fn groups_within(
    metadata: &ParquetMetaData,
    file_schema: &Schema,
    parquet_schema: &SchemaDescriptor,
    column: usize,
    groups: std::ops::Range<usize>,
    bounds: TimeBounds,
) -> Vec<bool> {
    let keep_all = vec![true; groups.len()];
    let Some(field) = file_schema.fields().get(column) else {
        return keep_all;
    };
    let Ok(converter) = StatisticsConverter::try_new(field.name(), file_schema, parquet_schema)
    else {
        return keep_all;
    };
    let chosen = &metadata.row_groups()[groups];
    let (Ok(mins), Ok(maxes)) = (
        converter.row_group_mins(chosen.iter()),
        converter.row_group_maxes(chosen.iter()),
    ) else {
        return keep_all;
    };
    let (Some(mins), Some(maxes)) = (as_nanos(&mins), as_nanos(&maxes)) else {
        return keep_all;
    };
    let (mins, maxes) = (
        mins.as_primitive::<TimestampNanosecondType>(),
        maxes.as_primitive::<TimestampNanosecondType>(),
    );
    (0..chosen.len())
        .map(|i| {
            mins.is_null(i) || maxes.is_null(i) || !bounds.excludes(mins.value(i), maxes.value(i))
        })
        .collect()
}

/// Timestamp statistics as UTC nanoseconds; `None` for other types or zones (a value
/// past the nanosecond range becomes NULL: its group is kept).
fn as_nanos(values: &ArrayRef) -> Option<ArrayRef> {
    let safe = CastOptions {
        safe: true,
        ..Default::default()
    };
    utc_unit_cast(values, &timestamp_type(), &safe)?.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(kept: &[bool]) -> SplitGroups {
        SplitGroups::new(4, &vec![10; kept.len()], kept)
    }

    #[test]
    fn without_pruning_a_reader_resumes_inside_its_group() {
        let all = groups(&[true, true, true]);
        assert_eq!(all.resume(0), (vec![4, 5, 6], 0));
        assert_eq!(all.resume(13), (vec![5, 6], 3));
        assert_eq!(all.resume(20), (vec![6], 0));
        assert_eq!(all.resume(30), (vec![], 0));
    }

    #[test]
    fn positions_count_the_rows_passed_over() {
        let some = groups(&[false, true, false, true]);
        assert_eq!(some.resume(0), (vec![5, 7], 0));
        // Handed out: rows 10–19, then 30–39; a batch may span the gap.
        assert_eq!(some.next_rows(0, 3), vec![10, 11, 12]);
        let across = some.next_rows(18, 4);
        assert_eq!(across, vec![18, 19, 30, 31]);
        // A position inside a passed-over group resumes at the next kept one.
        assert_eq!(some.resume(25), (vec![7], 0));
        assert_eq!(some.resume(32), (vec![7], 2));
        assert_eq!(some.next_rows(40, 5), Vec::<u64>::new());
    }

    #[test]
    fn every_row_of_the_kept_groups_is_handed_out_once_whatever_the_restarts() {
        let kept = [true, false, false, true, true, false, true];
        let split = SplitGroups::new(0, &[7, 3, 5, 1, 8, 2, 6], &kept);
        let expected: Vec<u64> = split.next_rows(0, 1_000);
        for batch in 1..10 {
            for restart_every in 1..6 {
                let (mut position, mut handed, mut batches) = (0u64, Vec::new(), 0);
                loop {
                    // A "restart": the reader is opened again at `position`.
                    if batches % restart_every == 0 {
                        let (open, offset) = split.resume(position);
                        if open.is_empty() {
                            break;
                        }
                        assert!(offset < 8);
                    }
                    let rows = split.next_rows(position, batch);
                    if rows.is_empty() {
                        break;
                    }
                    position = rows[rows.len() - 1] + 1;
                    handed.extend(rows);
                    batches += 1;
                }
                assert_eq!(
                    handed, expected,
                    "batch {batch}, restart every {restart_every}"
                );
            }
        }
        assert_eq!(expected.len(), 7 + 1 + 8 + 6);
    }
}
