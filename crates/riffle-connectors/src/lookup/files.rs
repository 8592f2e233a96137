//! A lookup table of files (JSON lines, CSV or Parquet), read whole when a subtask
//! opens it: the files of a dimension table that changes rarely. A restart reads them
//! again; changes while the job runs are not seen.

use super::keys::{has_null, KeyRows};
use crate::file_source::list_files;
use crate::file_source::reader::{Extent, FileReader};
use crate::sinks::FileFormat;
use riffle_core::arrow::array::ArrayRef;
use riffle_core::arrow::compute::concat_batches;
use riffle_core::arrow::datatypes::{DataType, SchemaRef};
use riffle_core::operator::OperatorCounters;
use riffle_core::{LookupMatches, LookupTable, LookupTableFactory, RecordBatch, Result};
use std::collections::HashMap;
use std::path::PathBuf;

/// Opens lookup readers of the files at a path.
#[derive(Debug)]
pub struct FileLookupFactory {
    path: String,
    format: FileFormat,
    schema: SchemaRef,
    files: Vec<PathBuf>,
}

impl FileLookupFactory {
    /// The files at `path` (a directory, file or glob) in `format`, with columns `schema`.
    ///
    /// # Errors
    /// No files at the path.
    pub fn new(path: &str, format: FileFormat, schema: SchemaRef) -> Result<Self> {
        let path = path.strip_prefix("file://").unwrap_or(path).to_string();
        let files = list_files(&path, format)?;
        Ok(Self {
            path,
            format,
            schema,
            files,
        })
    }

    /// Every row of every file, in one batch.
    fn read_all(&self) -> Result<RecordBatch> {
        let counters = OperatorCounters::default();
        let mut parts = Vec::new();
        for file in &self.files {
            let mut reader = FileReader::open(
                file,
                self.format,
                self.schema.clone(),
                8192,
                Extent::WHOLE,
                None,
                None,
            )?;
            while let Some((batch, _lines)) = reader.next_records(false, &counters)? {
                parts.push(batch);
            }
        }
        Ok(concat_batches(&self.schema, &parts)?)
    }
}

impl LookupTableFactory for FileLookupFactory {
    fn describe(&self) -> String {
        format!("{} files at {}", self.format.extension(), self.path)
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn open(&self, key: &[usize]) -> Result<Box<dyn LookupTable>> {
        let rows = self.read_all()?;
        let types: Vec<DataType> = key
            .iter()
            .map(|&k| self.schema.field(k).data_type().clone())
            .collect();
        let keys = KeyRows::new(&types)?;
        let columns: Vec<ArrayRef> = key.iter().map(|&k| rows.column(k).clone()).collect();
        let converted = keys.rows(&columns)?;
        let mut index: HashMap<Box<[u8]>, Vec<usize>> = HashMap::new();
        for row in 0..rows.num_rows() {
            if !has_null(&columns, row) {
                index
                    .entry(converted.row(row).as_ref().into())
                    .or_default()
                    .push(row);
            }
        }
        Ok(Box::new(FileLookup { rows, index, keys }))
    }
}

/// A subtask's copy of the files' rows, indexed by key.
struct FileLookup {
    rows: RecordBatch,
    index: HashMap<Box<[u8]>, Vec<usize>>,
    keys: KeyRows,
}

impl LookupTable for FileLookup {
    fn lookup(&mut self, keys: &[ArrayRef]) -> Result<LookupMatches> {
        let converted = self.keys.rows(keys)?;
        let mut matches = LookupMatches {
            batches: vec![self.rows.clone()],
            rows: Vec::new(),
        };
        for row in 0..converted.num_rows() {
            if has_null(keys, row) {
                continue;
            }
            if let Some(found) = self.index.get(converted.row(row).as_ref()) {
                matches.rows.extend(found.iter().map(|&r| (row, 0, r)));
            }
        }
        Ok(matches)
    }
}
