//! Parquet read-ahead: while one row group is decoded, the kernel is asked to read the
//! next one's column chunks (`posix_fadvise` with `WILLNEED`), so that the disk works
//! while the CPU decodes, with no thread and no buffer of riffle's own. Only the
//! chunks of the columns read are asked for. A file already in the page cache costs
//! one system call per row group.

use riffle_core::parquet::file::metadata::ParquetMetaData;
use std::fs::File;
use std::num::NonZeroU64;
use std::ops::Range;

/// The byte ranges of the row groups a reader reads, asked for one group ahead.
pub(super) struct RowGroupPrefetch {
    file: File,
    /// Each row group read (file index, in reading order) and its chunks' bytes.
    groups: Vec<(usize, Vec<Range<u64>>)>,
    /// How many of `groups` (from the first) were asked for.
    asked: usize,
}

impl RowGroupPrefetch {
    /// Read-ahead of row groups `groups` (file indices, in reading order) of `file`,
    /// whose leaf columns `leaves` are read (`None`: all).
    pub(super) fn new(
        file: File,
        metadata: &ParquetMetaData,
        groups: &[usize],
        leaves: Option<&[usize]>,
    ) -> Self {
        let groups = groups
            .iter()
            .filter_map(|&g| {
                let group = metadata.row_groups().get(g)?;
                let chunks = (0..group.num_columns())
                    .filter(|c| leaves.is_none_or(|l| l.contains(c)))
                    .map(|c| {
                        let (start, length) = group.column(c).byte_range();
                        start..start + length
                    })
                    .collect();
                Some((g, chunks))
            })
            .collect();
        let mut prefetch = Self {
            file,
            groups,
            asked: 0,
        };
        prefetch.ask_through(1);
        prefetch
    }

    /// Row group `group` (a file index) is being decoded: asks for the one after it.
    pub(super) fn decoding(&mut self, group: usize) {
        if let Some(at) = self.groups.iter().position(|(g, _)| *g == group) {
            self.ask_through(at + 1);
        }
    }

    /// Asks for the groups up to `last` (an index into `groups`) not yet asked for.
    fn ask_through(&mut self, last: usize) {
        let end = (last + 1).min(self.groups.len());
        for (_, chunks) in self.groups.get(self.asked..end).unwrap_or_default() {
            for chunk in chunks {
                if let Some(length) = NonZeroU64::new(chunk.end - chunk.start) {
                    // Advice only: a kernel that does not take it reads on demand.
                    let _ = rustix::fs::fadvise(
                        &self.file,
                        chunk.start,
                        Some(length),
                        rustix::fs::Advice::WillNeed,
                    );
                }
            }
        }
        self.asked = self.asked.max(end);
    }

    #[cfg(test)]
    fn asked(&self) -> Vec<usize> {
        self.groups[..self.asked].iter().map(|(g, _)| *g).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::{ArrayRef, Int64Array, RecordBatch};
    use riffle_core::arrow::datatypes::{DataType, Field, Schema};
    use riffle_core::parquet::arrow::ArrowWriter;
    use riffle_core::parquet::file::properties::WriterProperties;
    use riffle_core::parquet::file::reader::{FileReader, SerializedFileReader};
    use std::sync::Arc;

    #[test]
    fn the_next_row_group_is_asked_for_while_one_is_decoded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("b", DataType::Int64, false),
        ]));
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(10))
            .build();
        let mut writer =
            ArrowWriter::try_new(File::create(&path).unwrap(), schema.clone(), Some(props))
                .unwrap();
        let column: ArrayRef = Arc::new(Int64Array::from_iter_values(0..50));
        writer
            .write(&RecordBatch::try_new(schema, vec![column.clone(), column]).unwrap())
            .unwrap();
        writer.close().unwrap();
        let metadata = SerializedFileReader::new(File::open(&path).unwrap())
            .unwrap()
            .metadata()
            .clone();

        let mut prefetch = RowGroupPrefetch::new(
            File::open(&path).unwrap(),
            &metadata,
            &[1, 3, 4],
            Some(&[1]),
        );
        // The first group to read and the next, of column `b` only.
        assert_eq!(prefetch.asked(), [1, 3]);
        let (start, length) = metadata.row_group(1).column(1).byte_range();
        let b_of_group_1 = Range {
            start,
            end: start + length,
        };
        assert_eq!(prefetch.groups[0].1, vec![b_of_group_1]);
        prefetch.decoding(3);
        assert_eq!(prefetch.asked(), [1, 3, 4]);
        prefetch.decoding(4);
        prefetch.decoding(2); // not read: nothing asked
        assert_eq!(prefetch.asked(), [1, 3, 4]);
        let none = RowGroupPrefetch::new(File::open(&path).unwrap(), &metadata, &[], None);
        assert!(none.asked().is_empty());
        let all = RowGroupPrefetch::new(File::open(&path).unwrap(), &metadata, &[0], None);
        assert_eq!(all.groups[0].1.len(), 2);
    }
}
