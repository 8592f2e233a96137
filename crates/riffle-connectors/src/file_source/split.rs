//! Splits: the parts of the input handed to the source's subtasks, so that `-p 2`
//! reads one big file on two cores.
//!
//! A plain JSON-lines or CSV file is cut into byte ranges; a split reads the lines that
//! *begin* in its range (the last one to its end, past the range if need be), so the
//! cut needs no look at the text. A Parquet file is cut between row groups. A
//! compressed file cannot be entered in the middle and is one split.
//!
//! Splits are planned from the files' sizes and the parallelism; a checkpoint keeps
//! each split's bounds with its position, and a restore reads the saved splits
//! as they were (whatever the new parallelism would cut), so a row is never in two
//! splits. See docs/engine.md, "Reading text input".

use super::compression::Compression;
use crate::sinks::FileFormat;
use riffle_core::parquet::file::metadata::ParquetMetaDataReader;
use riffle_core::{Error, Result};
use std::fs::File;
use std::path::{Path, PathBuf};

/// The end of a split that reads to the end of its file (which may have grown).
pub(super) const TO_END: u64 = u64::MAX;

/// No split of a text file is smaller: each costs an open and a seek.
const MIN_SPLIT_BYTES: u64 = 4 << 20;
/// Nor larger: a restore re-reads at most the part of a split not yet read.
const MAX_SPLIT_BYTES: u64 = 256 << 20;
/// Splits per subtask when the input allows, so subtasks finish close together.
const SPLITS_PER_SUBTASK: u64 = 4;

/// One part of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Split {
    pub path: PathBuf,
    /// Bytes `[start, end)` of plain text, row groups `[start, end)` of Parquet, or
    /// `[0, TO_END)` for a compressed file.
    pub start: u64,
    pub end: u64,
}

/// How a file can be cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Layout {
    /// Plain text of this many bytes; positions are byte offsets of line starts.
    Bytes(u64),
    /// Parquet with row groups of these (compressed) sizes; positions are rows read.
    RowGroups(Vec<u64>),
    /// Compressed text; positions are lines read.
    Whole,
}

impl Layout {
    /// Reads the size (text) or the footer (Parquet) of `path`.
    pub(super) fn of(path: &Path, format: FileFormat) -> Result<Self> {
        if format == FileFormat::Parquet {
            let file = File::open(path).map_err(|e| Error::io(path, e))?;
            let metadata = ParquetMetaDataReader::new()
                .parse_and_finish(&file)
                .map_err(|e| {
                    Error::config(
                        "path",
                        format!("{} is not a readable Parquet file: {e}", path.display()),
                    )
                })?;
            let sizes = metadata
                .row_groups()
                .iter()
                .map(|g| u64::try_from(g.compressed_size()).unwrap_or(0))
                .collect();
            return Ok(Layout::RowGroups(sizes));
        }
        if Compression::of(path) != Compression::None {
            return Ok(Layout::Whole);
        }
        let len = std::fs::metadata(path)
            .map_err(|e| Error::io(path, e))?
            .len();
        Ok(Layout::Bytes(len))
    }

    /// Where a fresh split starts reading: its first byte for text, nothing read else.
    pub(super) fn first_position(&self, split: &Split) -> u64 {
        match self {
            Layout::Bytes(_) => split.start,
            Layout::RowGroups(_) | Layout::Whole => 0,
        }
    }

    fn bytes(&self) -> u64 {
        match self {
            Layout::Bytes(len) => *len,
            Layout::RowGroups(sizes) => sizes.iter().sum(),
            Layout::Whole => 0,
        }
    }

    /// `[start, end)` bounds of pieces of about `size` bytes; the last reads to the end.
    fn cut(&self, size: u64) -> Vec<(u64, u64)> {
        let size = size.max(1);
        let mut bounds = match self {
            Layout::Bytes(len) => {
                let pieces = len.div_ceil(size).max(1);
                (0..pieces)
                    .map(|i| (len * i / pieces, len * (i + 1) / pieces))
                    .collect::<Vec<_>>()
            }
            Layout::RowGroups(sizes) => {
                let mut bounds = Vec::new();
                let (mut first, mut bytes) = (0, 0);
                for (group, group_bytes) in sizes.iter().enumerate() {
                    bytes += group_bytes;
                    if bytes >= size && group + 1 < sizes.len() {
                        bounds.push((first, group as u64 + 1));
                        (first, bytes) = (group as u64 + 1, 0);
                    }
                }
                bounds.push((first, sizes.len() as u64));
                bounds
            }
            Layout::Whole => vec![(0, TO_END)],
        };
        if let Some(last) = bounds.last_mut() {
            last.1 = TO_END;
        }
        bounds
    }
}

/// The size to cut text files into: the input spread over a few splits per subtask,
/// within bounds. `split_bytes` (a setting) overrides it.
pub(super) fn split_size(layouts: &[Layout], parallelism: usize, split_bytes: Option<u64>) -> u64 {
    if let Some(bytes) = split_bytes {
        return bytes.max(1);
    }
    let total: u64 = layouts.iter().map(Layout::bytes).sum();
    (total / (SPLITS_PER_SUBTASK * parallelism.max(1) as u64))
        .clamp(MIN_SPLIT_BYTES, MAX_SPLIT_BYTES)
}

/// Every file's splits, in file order.
pub(super) fn plan(files: &[PathBuf], layouts: &[Layout], size: u64) -> Vec<Split> {
    files
        .iter()
        .zip(layouts)
        .flat_map(|(path, layout)| {
            layout.cut(size).into_iter().map(|(start, end)| Split {
                path: path.clone(),
                start,
                end,
            })
        })
        .collect()
}

/// Subtask `i` of `p` reads splits `i, i + p, …` of the whole input's.
pub(super) fn assign<T: Clone>(splits: &[T], subtask: usize, parallelism: usize) -> Vec<T> {
    splits
        .iter()
        .skip(subtask)
        .step_by(parallelism.max(1))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(layout: Layout, size: u64) -> Vec<(u64, u64)> {
        layout.cut(size)
    }

    #[test]
    fn text_is_cut_into_even_byte_ranges_the_last_reading_to_the_end() {
        assert_eq!(
            bounds(Layout::Bytes(100), 40),
            vec![(0, 33), (33, 66), (66, TO_END)]
        );
        assert_eq!(bounds(Layout::Bytes(10), 40), vec![(0, TO_END)]);
        assert_eq!(bounds(Layout::Bytes(0), 40), vec![(0, TO_END)]);
    }

    #[test]
    fn parquet_is_cut_between_row_groups_and_compressed_text_not_at_all() {
        let groups = Layout::RowGroups(vec![10, 10, 10, 10, 10]);
        assert_eq!(bounds(groups, 20), vec![(0, 2), (2, 4), (4, TO_END)]);
        assert_eq!(bounds(Layout::RowGroups(vec![50]), 20), vec![(0, TO_END)]);
        assert_eq!(bounds(Layout::RowGroups(vec![]), 20), vec![(0, TO_END)]);
        assert_eq!(bounds(Layout::Whole, 1), vec![(0, TO_END)]);
    }

    #[test]
    fn splits_are_sized_for_a_few_per_subtask_within_bounds() {
        let big = [Layout::Bytes(800 << 20)];
        assert_eq!(split_size(&big, 2, None), 100 << 20);
        assert_eq!(split_size(&big, 1, None), 200 << 20);
        assert_eq!(
            split_size(&[Layout::Bytes(1 << 20)], 2, None),
            MIN_SPLIT_BYTES
        );
        assert_eq!(
            split_size(&[Layout::Bytes(100 << 30)], 1, None),
            MAX_SPLIT_BYTES
        );
        assert_eq!(split_size(&big, 2, Some(1000)), 1000);
    }

    #[test]
    fn subtasks_take_every_pth_split() {
        let splits = [0, 1, 2, 3, 4];
        assert_eq!(assign(&splits, 0, 2), vec![0, 2, 4]);
        assert_eq!(assign(&splits, 1, 2), vec![1, 3]);
        assert_eq!(assign(&splits, 3, 4), vec![3]);
        assert!(assign(&splits, 5, 6).is_empty());
    }
}
