//! The row groups of a Parquet split that a reader reads, when a time range lets some be
//! passed over (see `SourceFactory::reading_times_within`), and where in the split the
//! reader is.
//!
//! A position stays a count of the split's rows, passed-over ones included, so a
//! checkpoint means the same row whatever range the next run prunes with (or none): a
//! restore resumes at the same row, and no row is read twice or lost between two runs
//! that prune differently.

use crate::time_columns::utc_unit_cast;
use riffle_core::arrow::array::{Array, ArrayRef, AsArray};
use riffle_core::arrow::compute::kernels::cast::CastOptions;
use riffle_core::arrow::datatypes::{Schema, TimestampNanosecondType};
use riffle_core::parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use riffle_core::parquet::arrow::arrow_reader::RowSelector;
use riffle_core::parquet::file::metadata::ParquetMetaData;
use riffle_core::parquet::schema::types::SchemaDescriptor;
use riffle_core::{timestamp_type, TimeBounds};
use std::ops::Range;

/// One row group of a split: its index in the file, its first row among the split's
/// rows, its row count, and the rows of it that are read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Group {
    index: usize,
    first: u64,
    rows: u64,
    /// Ranges of the group's rows (0-based, ascending, apart); empty: passed over.
    read: Vec<Range<u64>>,
}

/// The row groups of one split, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SplitGroups {
    groups: Vec<Group>,
}

impl SplitGroups {
    /// Row groups `first_index, first_index + 1, …` with `rows` rows each, of which
    /// the rows `read` are read (one list of ranges a group).
    pub(super) fn new(first_index: usize, rows: &[u64], read: Vec<Vec<Range<u64>>>) -> Self {
        let mut first = 0;
        let groups = rows
            .iter()
            .zip(read)
            .enumerate()
            .map(|(i, (&rows, read))| {
                let group = Group {
                    index: first_index + i,
                    first,
                    rows,
                    read,
                };
                first += rows;
                group
            })
            .collect();
        Self { groups }
    }

    /// What a reader opened at `position` reads: the row groups with rows still to
    /// read (file indices), and which of their rows, in Parquet's terms.
    pub(super) fn resume(&self, position: u64) -> (Vec<usize>, Vec<RowSelector>) {
        let mut open = Vec::new();
        let mut selection = Vec::new();
        for g in &self.groups {
            let from = position.saturating_sub(g.first);
            let ahead: Vec<Range<u64>> = g
                .read
                .iter()
                .map(|r| r.start.max(from)..r.end)
                .filter(|r| !r.is_empty())
                .collect();
            if ahead.is_empty() {
                continue;
            }
            open.push(g.index);
            let mut at = 0;
            for r in ahead {
                if r.start > at {
                    selection.push(RowSelector::skip(count(r.start - at)));
                }
                selection.push(RowSelector::select(count(r.end - r.start)));
                at = r.end;
            }
            if g.rows > at {
                selection.push(RowSelector::skip(count(g.rows - at)));
            }
        }
        (open, selection)
    }

    /// The row group (file index) that split row `row` (0-based) is in.
    pub(super) fn group_of(&self, row: u64) -> Option<usize> {
        self.groups
            .iter()
            .find(|g| g.first <= row && row < g.first + g.rows)
            .map(|g| g.index)
    }

    /// The split rows (0-based) of the next `n` rows a reader at `position` hands out.
    pub(super) fn next_rows(&self, position: u64, n: usize) -> Vec<u64> {
        let mut rows = Vec::new();
        for g in &self.groups {
            for r in &g.read {
                let start = position.max(g.first + r.start);
                let end = g.first + r.end;
                let take = (end.saturating_sub(start)).min((n - rows.len()) as u64);
                rows.extend(start..start + take);
                if rows.len() == n {
                    return rows;
                }
            }
        }
        rows
    }
}

/// Every row of a group of `rows` rows when it is `kept`, else none.
pub(super) fn whole_or_none(rows: u64, kept: bool) -> Vec<Range<u64>> {
    if kept && rows > 0 {
        vec![Range {
            start: 0,
            end: rows,
        }]
    } else {
        Vec::new()
    }
}

fn count(rows: u64) -> usize {
    usize::try_from(rows).unwrap_or(usize::MAX)
}

/// The rows of each of row groups `groups` that may hold a value of column `column`
/// (an index into the file's Arrow schema) within `bounds`: none of a group whose
/// statistics rule it out ([`groups_within`]), and of the others the pages the page
/// index does not rule out ([`pages_within`]), or all rows without a page index.
pub(super) fn rows_within(
    metadata: &ParquetMetaData,
    file_schema: &Schema,
    parquet_schema: &SchemaDescriptor,
    column: usize,
    groups: std::ops::Range<usize>,
    bounds: TimeBounds,
) -> Vec<Vec<Range<u64>>> {
    let kept = groups_within(
        metadata,
        file_schema,
        parquet_schema,
        column,
        groups.clone(),
        bounds,
    );
    let rows_of = |g: usize| u64::try_from(metadata.row_group(g).num_rows()).unwrap_or(0);
    let mut read: Vec<Vec<Range<u64>>> = groups
        .clone()
        .zip(kept)
        .map(|(g, kept)| whole_or_none(rows_of(g), kept))
        .collect();
    let kept_groups: Vec<usize> = groups
        .clone()
        .filter(|g| !read[g - groups.start].is_empty())
        .collect();
    if let Some(pages) = pages_within(
        metadata,
        file_schema,
        parquet_schema,
        column,
        &kept_groups,
        bounds,
    ) {
        for (g, ranges) in kept_groups.iter().zip(pages) {
            read[g - groups.start] = ranges;
        }
    }
    read
}

/// Which of row groups `groups` may hold a value of column `column` (an index into the
/// file's Arrow schema) within `bounds`, by the groups' min/max statistics. A group
/// without statistics, or a column that is not a timestamp, is kept.
fn groups_within(
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

/// The rows of each row group of `groups` (file indices) that may hold a value of
/// column `column` within `bounds`, page by page, by the pages' min/max statistics in the
/// file's page index: runs of pages that may, as ranges of the group's rows. `None`
/// when the file has no page index for the column (the groups are then read whole).
fn pages_within(
    metadata: &ParquetMetaData,
    file_schema: &Schema,
    parquet_schema: &SchemaDescriptor,
    column: usize,
    groups: &[usize],
    bounds: TimeBounds,
) -> Option<Vec<Vec<Range<u64>>>> {
    let (Some(column_index), Some(offset_index)) =
        (metadata.column_index(), metadata.offset_index())
    else {
        return None;
    };
    let field = file_schema.fields().get(column)?;
    let converter = StatisticsConverter::try_new(field.name(), file_schema, parquet_schema).ok()?;
    let leaf = converter.parquet_column_index()?;
    let mins = converter
        .data_page_mins(column_index, offset_index, groups)
        .ok()?;
    let maxes = converter
        .data_page_maxes(column_index, offset_index, groups)
        .ok()?;
    let rows = converter
        .data_page_row_counts(offset_index, metadata.row_groups(), groups)
        .ok()??;
    let (mins, maxes) = (as_nanos(&mins)?, as_nanos(&maxes)?);
    let (mins, maxes) = (
        mins.as_primitive::<TimestampNanosecondType>(),
        maxes.as_primitive::<TimestampNanosecondType>(),
    );
    if mins.len() != rows.len() || maxes.len() != rows.len() || rows.null_count() > 0 {
        return None;
    }
    let mut page = 0;
    let mut read = Vec::with_capacity(groups.len());
    for &g in groups {
        let pages = offset_index.get(g)?.get(leaf)?.page_locations().len();
        let mut ranges: Vec<Range<u64>> = Vec::new();
        let mut first_row = 0;
        for p in page..page + pages {
            let page_rows = *rows.values().get(p)?;
            let may_hold = mins.is_null(p)
                || maxes.is_null(p)
                || !bounds.excludes(mins.value(p), maxes.value(p));
            if may_hold {
                match ranges.last_mut() {
                    Some(last) if last.end == first_row => last.end += page_rows,
                    _ => ranges.push(first_row..first_row + page_rows),
                }
            }
            first_row += page_rows;
        }
        page += pages;
        read.push(ranges);
    }
    (page == rows.len()).then_some(read)
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
        let read = kept.iter().map(|&k| whole_or_none(10, k)).collect();
        SplitGroups::new(4, &vec![10; kept.len()], read)
    }

    fn select(n: usize) -> RowSelector {
        RowSelector::select(n)
    }

    fn skip(n: usize) -> RowSelector {
        RowSelector::skip(n)
    }

    #[test]
    fn without_pruning_a_reader_resumes_inside_its_group() {
        let all = groups(&[true, true, true]);
        assert_eq!(all.resume(0), (vec![4, 5, 6], vec![select(10); 3]));
        assert_eq!(
            all.resume(13),
            (vec![5, 6], vec![skip(3), select(7), select(10)])
        );
        assert_eq!(all.resume(20), (vec![6], vec![select(10)]));
        assert_eq!(all.resume(30), (vec![], vec![]));
    }

    #[test]
    fn positions_count_the_rows_passed_over() {
        let some = groups(&[false, true, false, true]);
        assert_eq!(some.resume(0), (vec![5, 7], vec![select(10); 2]));
        // Handed out: rows 10–19, then 30–39; a batch may span the gap.
        assert_eq!(some.next_rows(0, 3), vec![10, 11, 12]);
        let across = some.next_rows(18, 4);
        assert_eq!(across, vec![18, 19, 30, 31]);
        // A position inside a passed-over group resumes at the next kept one.
        assert_eq!(some.resume(25), (vec![7], vec![select(10)]));
        assert_eq!(some.resume(32), (vec![7], vec![skip(2), select(8)]));
        assert_eq!(some.next_rows(40, 5), Vec::<u64>::new());
    }

    #[test]
    fn pages_passed_over_inside_a_group_are_skipped_and_counted() {
        // Groups 0 and 1 of 10 rows: rows 2–4 and 8–9 of the first, 0–2 of the second.
        let pages = SplitGroups::new(0, &[10, 10], vec![vec![2..5, 8..10], vec![0..3]]);
        assert_eq!(
            pages.resume(0),
            (
                vec![0, 1],
                vec![skip(2), select(3), skip(3), select(2), select(3), skip(7)]
            )
        );
        assert_eq!(pages.next_rows(0, 4), vec![2, 3, 4, 8]);
        assert_eq!(pages.next_rows(5, 10), vec![8, 9, 10, 11, 12]);
        // Inside a range, inside a gap, past the first group's last range.
        assert_eq!(
            pages.resume(3),
            (
                vec![0, 1],
                vec![skip(3), select(2), skip(3), select(2), select(3), skip(7)]
            )
        );
        assert_eq!(
            pages.resume(6),
            (vec![0, 1], vec![skip(8), select(2), select(3), skip(7)])
        );
        assert_eq!(pages.resume(10), (vec![1], vec![select(3), skip(7)]));
        assert_eq!(pages.resume(13), (vec![], vec![]));
        assert_eq!(
            [0, 9, 10, 19, 20].map(|r| pages.group_of(r)),
            [Some(0), Some(0), Some(1), Some(1), None]
        );
    }

    #[test]
    fn every_row_of_the_kept_groups_is_handed_out_once_whatever_the_restarts() {
        let kept = [true, false, false, true, true, false, true];
        let rows = [7, 3, 5, 1, 8, 2, 6];
        let mut read: Vec<Vec<Range<u64>>> = rows
            .iter()
            .zip(kept)
            .map(|(&r, k)| whole_or_none(r, k))
            .collect();
        read[4] = vec![1..3, 5..7]; // pages passed over inside a group
        let split = SplitGroups::new(0, &rows, read);
        let expected: Vec<u64> = split.next_rows(0, 1_000);
        for batch in 1..10 {
            for restart_every in 1..6 {
                let (mut position, mut handed, mut batches) = (0u64, Vec::new(), 0);
                loop {
                    // A "restart": the reader is opened again at `position`.
                    if batches % restart_every == 0 {
                        let (open, selection) = split.resume(position);
                        if open.is_empty() {
                            break;
                        }
                        // The selection covers the opened groups' rows exactly.
                        let covered: usize = selection.iter().map(|s| s.row_count).sum();
                        let rows_of = |g: &usize| rows[*g] as usize;
                        assert_eq!(covered, open.iter().map(rows_of).sum::<usize>());
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
        assert_eq!(expected.len(), 7 + 1 + 4 + 6);
    }
}
