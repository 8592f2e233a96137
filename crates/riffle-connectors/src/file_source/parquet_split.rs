//! One Parquet split being read: its row groups (those a time range leaves, and of
//! them the rows its pages may hold), where in the split the reader is, the next row
//! group read ahead, and the file's columns converted to the table's types.

use super::prefetch::RowGroupPrefetch;
use super::reader::Extent;
use super::row_groups::{rows_within, whole_or_none, SplitGroups};
use crate::decode::widen;
use crate::time_columns::utc_unit_cast;
use riffle_core::arrow::array::{Array, ArrayRef, RecordBatchOptions};
use riffle_core::arrow::compute::kernels::cast::{cast_with_options, CastOptions};
use riffle_core::arrow::datatypes::SchemaRef;
use riffle_core::parquet::arrow::arrow_reader::{
    ArrowReaderOptions, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder, RowSelection,
};
use riffle_core::parquet::arrow::ProjectionMask;
use riffle_core::parquet::file::metadata::{PageIndexPolicy, RowGroupMetaData};
use riffle_core::{Error, RecordBatch, Result, TimeBounds};
use std::fs::File;
use std::path::Path;

/// A Parquet split's reader: the position (rows of the extent read or passed over),
/// the rows of the file before the extent, the columns read (ascending) if not all,
/// and which rows of the extent's row groups are read.
pub(super) struct ParquetSplit {
    reader: ParquetRecordBatchReader,
    rows: u64,
    rows_before: u64,
    read: Option<Vec<usize>>,
    groups: SplitGroups,
    prefetch: RowGroupPrefetch,
}

impl ParquetSplit {
    /// Row groups `[start, end)` of `extent`, from row `position` of them, passing over
    /// the rows `times` rules out.
    pub(super) fn open(
        path: &Path,
        file: File,
        batch_rows: usize,
        extent: Extent,
        read: Option<Vec<usize>>,
        times: Option<(usize, TimeBounds)>,
    ) -> Result<Self> {
        let unreadable = |e: riffle_core::parquet::errors::ParquetError| Error::MalformedRecord {
            file: path.into(),
            line: 0,
            field: None,
            message: format!("not a readable Parquet file: {e}"),
        };
        let for_prefetch = file.try_clone().map_err(|e| Error::io(path, e))?;
        // The page index is read only when a time range may pass over pages.
        let options = ArrowReaderOptions::new().with_page_index_policy(match times {
            Some(_) => PageIndexPolicy::Optional,
            None => PageIndexPolicy::Skip,
        });
        let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(file, options)
            .map_err(unreadable)?;
        let groups = builder.metadata().row_groups();
        let end = usize::try_from(extent.end)
            .unwrap_or(usize::MAX)
            .min(groups.len());
        let start = usize::try_from(extent.start).unwrap_or(usize::MAX).min(end);
        let rows_of = |g: &RowGroupMetaData| u64::try_from(g.num_rows()).unwrap_or(0);
        let rows_before = groups[..start].iter().map(rows_of).sum();
        let rows: Vec<u64> = groups[start..end].iter().map(rows_of).collect();
        let rows_read = match times {
            Some((column, bounds)) => rows_within(
                builder.metadata(),
                builder.schema(),
                builder.parquet_schema(),
                column,
                start..end,
                bounds,
            ),
            None => rows.iter().map(|&r| whole_or_none(r, true)).collect(),
        };
        let groups = SplitGroups::new(start, &rows, rows_read);
        let (read_groups, selection) = groups.resume(extent.position);
        let columns = match &read {
            Some(read) => ProjectionMask::roots(builder.parquet_schema(), read.clone()),
            None => ProjectionMask::all(),
        };
        let leaves: Option<Vec<usize>> = read.as_ref().map(|read| {
            let parquet = builder.parquet_schema();
            (0..parquet.num_columns())
                .filter(|&leaf| read.contains(&parquet.get_column_root_idx(leaf)))
                .collect()
        });
        let prefetch = RowGroupPrefetch::new(
            for_prefetch,
            builder.metadata(),
            &read_groups,
            leaves.as_deref(),
        );
        let reader = builder
            .with_batch_size(batch_rows)
            .with_row_groups(read_groups)
            .with_row_selection(RowSelection::from(selection))
            .with_projection(columns)
            .build()
            .map_err(unreadable)?;
        Ok(Self {
            reader,
            rows: extent.position,
            rows_before,
            read,
            groups,
            prefetch,
        })
    }

    /// Where to resume: rows of the extent read or passed over.
    pub(super) fn position(&self) -> u64 {
        self.rows
    }

    /// The next batch and its rows' numbers in the file (1-based), or `None` at the
    /// end of the split.
    pub(super) fn next_batch(
        &mut self,
        path: &Path,
        schema: &SchemaRef,
    ) -> Result<Option<(RecordBatch, Vec<u64>)>> {
        let Some(batch) = self.reader.next() else {
            return Ok(None);
        };
        let before = self.rows_before;
        let numbered =
            |rows: Vec<u64>| -> Vec<u64> { rows.into_iter().map(|r| before + r + 1).collect() };
        let batch = batch.map_err(|e| Error::MalformedRecord {
            file: path.into(),
            line: numbered(self.groups.next_rows(self.rows, 1))
                .first()
                .copied()
                .unwrap_or(0),
            field: None,
            message: format!("unreadable Parquet data: {e}"),
        })?;
        let columns = match &self.read {
            Some(read) => widen(batch.columns(), read, schema, batch.num_rows()),
            None => batch.columns().to_vec(),
        };
        let batch = as_declared(path, columns, schema, batch.num_rows())?;
        let handed_out = self.groups.next_rows(self.rows, batch.num_rows());
        if handed_out.len() != batch.num_rows() {
            return Err(Error::MalformedRecord {
                file: path.into(),
                line: 0,
                field: None,
                message: format!(
                    "the row groups hold fewer rows than their metadata says ({} read past row {})",
                    batch.num_rows(),
                    self.rows_before + self.rows
                ),
            });
        }
        if let Some(last) = handed_out.last() {
            self.rows = last + 1;
            if let Some(group) = self.groups.group_of(*last) {
                self.prefetch.decoding(group);
            }
        }
        Ok(Some((batch, numbered(handed_out))))
    }
}

/// Parquet columns as the table declares them: a file may hold a timestamp in another
/// unit, or an INT where the table has BIGINT. A column that cannot be converted is
/// named with the file.
fn as_declared(
    path: &Path,
    columns: Vec<ArrayRef>,
    schema: &SchemaRef,
    rows: usize,
) -> Result<RecordBatch> {
    let bad = |message: String| Error::MalformedRecord {
        file: path.into(),
        line: 0,
        field: None,
        message,
    };
    if columns.len() != schema.fields().len() {
        return Err(bad(format!(
            "the file has {} columns, the table declares {}",
            columns.len(),
            schema.fields().len()
        )));
    }
    let exact = CastOptions {
        safe: false,
        ..Default::default()
    };
    let columns = columns
        .into_iter()
        .zip(schema.fields())
        .map(|(column, field)| {
            if column.data_type() == field.data_type() {
                return Ok(column);
            }
            utc_unit_cast(&column, field.data_type(), &exact)
                .unwrap_or_else(|| cast_with_options(&column, field.data_type(), &exact))
                .map_err(|e| {
                    bad(format!(
                    "column `{}` is {} in the file and {} in the table, and does not convert: {e}",
                    field.name(),
                    column.data_type(),
                    field.data_type()
                ))
                })
        })
        .collect::<Result<Vec<_>>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema.clone(), columns, &options)
        .map_err(|e| bad(e.to_string()))
}
