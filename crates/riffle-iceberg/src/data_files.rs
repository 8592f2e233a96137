//! One sink subtask's Parquet data files: rows are cast to the table's types and written
//! with riffle's own Parquet writer straight under their final names in the table's
//! data directory (a local file, or an S3 object put whole when the file closes). A data
//! file is invisible to readers until a snapshot lists it, so nothing is renamed at
//! commit (docs/connectors.md, "iceberg").
//!
//! Names are `riffle-{subtask:03}-g{generation}-{sequence:05}.parquet`: two runs (a
//! zombie and its successor) never write one name, and recovery can tell the data
//! files of older runs (which no snapshot lists) from those of the running one.

use crate::codec::Codec;
use crate::partition::{encode, PartitionKey, Partitioner};
use crate::schema::{file_schema, TableColumn};
use crate::storage::{upload, Location};
use iceberg::spec::PrimitiveType;
use object_store::path::Path as ObjectPath;
use object_store::ObjectStore;
use riffle_connectors::io_runtime::block_on;
use riffle_core::arrow::array::ArrayRef;
use riffle_core::arrow::compute::cast;
use riffle_core::arrow::datatypes::SchemaRef;
use riffle_core::parquet::arrow::ArrowWriter;
use riffle_core::parquet::file::metadata::ParquetMetaData;
use riffle_core::parquet::file::properties::WriterProperties;
use riffle_core::{Error, RecordBatch, Result};
use serde::{Deserialize, Serialize};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;

/// A finished data file, as its committable describes it to the committer: plain
/// values, from which the committer builds the iceberg crate's data-file descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenFile {
    /// The file's location as the table names it (`file:///…/data/riffle-….parquet`).
    pub location: String,
    /// Rows in it.
    pub records: u64,
    /// Its size in bytes.
    pub bytes: u64,
    /// Per field id: values (nulls included), nulls, compressed bytes, and the lower and
    /// upper bounds in Iceberg's single-value encoding (hex), where exact.
    pub columns: BTreeMap<i32, ColumnFacts>,
    /// The partition spec the file was written for (0: unpartitioned).
    #[serde(default)]
    pub spec_id: i32,
    /// Its partition's values in Iceberg's single-value encoding (hex; `None` for
    /// null), in spec order; empty for an unpartitioned table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partition: Vec<Option<String>>,
}

/// Statistics of one column of a data file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnFacts {
    pub values: u64,
    pub nulls: u64,
    pub bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper: Option<String>,
}

/// Where and how a subtask writes its data files.
#[derive(Debug, Clone)]
pub struct DataFileTarget {
    /// The table's data directory.
    pub dir: Location,
    /// The same directory as the table's locations spell it (`file:///…/data`,
    /// `s3://bucket/…/data`).
    pub location: String,
    /// The table's columns the output writes, in output column order.
    pub columns: Vec<TableColumn>,
    /// A file is closed once it holds at least this many bytes.
    pub target_file_bytes: u64,
    /// The partitions of the table's spec; `None` for an unpartitioned table.
    pub partitioner: Option<Arc<Partitioner>>,
    /// The data pages' codec.
    pub codec: Codec,
}

struct OpenFile {
    /// The file's path under the data directory (`name` or `partition/…/name`).
    relative: String,
    /// Its partition.
    key: PartitionKey,
    /// The sequence number in its name (files are handed over in this order).
    sequence: u64,
    writer: ArrowWriter<Spool>,
    records: u64,
}

/// Where an open data file's bytes go: its local file, or memory until the whole
/// object is put (at most the target file size, or one epoch's rows).
enum Spool {
    File {
        path: PathBuf,
        file: BufWriter<File>,
    },
    Object {
        store: Arc<dyn ObjectStore>,
        key: ObjectPath,
        bytes: Vec<u8>,
    },
}

impl Write for Spool {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Spool::File { file, .. } => file.write(buf),
            Spool::Object { bytes, .. } => bytes.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Spool::File { file, .. } => file.flush(),
            Spool::Object { .. } => Ok(()),
        }
    }
}

impl Spool {
    /// Makes the finished file durable where it belongs; returns its size.
    fn land(&mut self) -> Result<u64> {
        match self {
            Spool::File { path, file } => {
                file.flush().map_err(|e| Error::io(&*path, e))?;
                let file = file.get_ref();
                file.sync_all().map_err(|e| Error::io(&*path, e))?;
                Ok(file.metadata().map_err(|e| Error::io(&*path, e))?.len())
            }
            Spool::Object { store, key, bytes } => {
                let bytes = std::mem::take(bytes);
                let size = bytes.len() as u64;
                let (store, key) = (Arc::clone(store), key.clone());
                block_on(async move { upload(&store, &key, bytes.into()).await })??;
                Ok(size)
            }
        }
    }
}

/// Writes one subtask's rows into rolling data files.
pub struct DataFileWriter {
    target: DataFileTarget,
    schema: SchemaRef,
    subtask: usize,
    generation: u64,
    sequence: u64,
    /// The open file of each partition written since the last barrier (one, keyed by
    /// the empty key, for an unpartitioned table).
    open: HashMap<PartitionKey, OpenFile>,
    finished: Vec<WrittenFile>,
}

impl DataFileWriter {
    /// A writer for subtask `subtask` of the run of `generation`.
    pub fn new(target: DataFileTarget, subtask: usize, generation: u64) -> Self {
        let schema = file_schema(&target.columns);
        Self {
            target,
            schema,
            subtask,
            generation,
            sequence: 0,
            open: HashMap::new(),
            finished: Vec::new(),
        }
    }

    /// Writes `batch`, whose columns are the output's in order.
    ///
    /// # Errors
    /// A value that does not fit the table's type; storage failures.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let columns: Vec<ArrayRef> = self
            .schema
            .fields()
            .iter()
            .zip(batch.columns())
            .map(|(field, column)| {
                if column.data_type() == field.data_type() {
                    Ok(column.clone())
                } else {
                    cast(column, field.data_type())
                }
            })
            .collect::<std::result::Result<_, _>>()?;
        let rows = RecordBatch::try_new(self.schema.clone(), columns)?;
        match self.target.partitioner.clone() {
            None => self.write_to(Vec::new(), &rows),
            Some(partitioner) => {
                for (key, rows) in partitioner.split(&rows)? {
                    self.write_to(key, &rows)?;
                }
                Ok(())
            }
        }
    }

    /// Writes `rows` of partition `key` into its open file, rolling it when full.
    fn write_to(&mut self, key: PartitionKey, rows: &RecordBatch) -> Result<()> {
        let file = match self.open.entry(key) {
            Entry::Occupied(entry) => entry.into_mut(),
            Entry::Vacant(entry) => {
                let name = data_file_name(self.subtask, self.generation, self.sequence);
                let file = open_file(&self.target, &self.schema, entry.key(), name, self.sequence)?;
                self.sequence += 1;
                entry.insert(file)
            }
        };
        file.writer.write(rows)?;
        file.records += rows.num_rows() as u64;
        let full = file.writer.bytes_written() as u64 + file.writer.in_progress_size() as u64
            >= self.target.target_file_bytes;
        if full {
            let key = file.key.clone();
            if let Some(file) = self.open.remove(&key) {
                self.close(file)?;
            }
        }
        Ok(())
    }

    /// Closes the open file (durably) and hands over every file finished since the last
    /// call.
    ///
    /// # Errors
    /// Storage failures.
    pub fn take_finished(&mut self) -> Result<Vec<WrittenFile>> {
        // In the order the files were opened, so that committables are deterministic.
        let mut open: Vec<OpenFile> = self.open.drain().map(|(_, file)| file).collect();
        open.sort_by_key(|file| file.sequence);
        for file in open {
            self.close(file)?;
        }
        Ok(std::mem::take(&mut self.finished))
    }

    fn close(&mut self, file: OpenFile) -> Result<()> {
        let mut writer = file.writer;
        let metadata = writer.finish()?;
        let bytes = writer.inner_mut().land()?;
        let partitioner = self.target.partitioner.as_ref();
        self.finished.push(WrittenFile {
            location: format!("{}/{}", self.target.location, file.relative),
            records: file.records,
            bytes,
            columns: column_facts(&metadata, &self.target.columns),
            spec_id: partitioner.map_or(0, |p| p.spec_id()),
            partition: encode(&file.key),
        });
        Ok(())
    }
}

/// Opens data file `name` (the writer's `sequence`-th) of partition `key`.
fn open_file(
    target: &DataFileTarget,
    schema: &SchemaRef,
    key: &PartitionKey,
    name: String,
    sequence: u64,
) -> Result<OpenFile> {
    let relative = match &target.partitioner {
        Some(partitioner) => format!("{}/{name}", partitioner.path(key)),
        None => name,
    };
    let spool = match &target.dir {
        Location::Local(dir) => {
            let path = dir.join(&relative);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
            }
            let file = File::create(&path).map_err(|e| Error::io(&path, e))?;
            Spool::File {
                path,
                file: BufWriter::with_capacity(1 << 20, file),
            }
        }
        Location::Object { store, key } => Spool::Object {
            store: Arc::clone(store),
            key: ObjectPath::from(format!("{key}/{relative}")),
            bytes: Vec::new(),
        },
    };
    let properties = WriterProperties::builder()
        .set_compression(target.codec.parquet())
        .build();
    let writer = ArrowWriter::try_new(spool, schema.clone(), Some(properties))?;
    Ok(OpenFile {
        relative,
        key: key.clone(),
        sequence,
        writer,
        records: 0,
    })
}

/// A data file's name (see the module comment).
pub fn data_file_name(subtask: usize, generation: u64, sequence: u64) -> String {
    format!("riffle-{subtask:03}-g{generation}-{sequence:05}.parquet")
}

/// The generation in a data file's name (or path: the last segment counts); `None`
/// for files riffle did not name.
pub fn data_file_generation(path: &str) -> Option<u64> {
    let name = path.rsplit('/').next()?;
    let rest = name.strip_prefix("riffle-")?.strip_suffix(".parquet")?;
    let mut parts = rest.split('-');
    parts.next()?.parse::<usize>().ok()?;
    let generation = parts.next()?.strip_prefix('g')?.parse().ok()?;
    parts.next()?.parse::<u64>().ok()?;
    parts.next().is_none().then_some(generation)
}

/// Per-column statistics from the file footer. Bounds come from the row groups'
/// min/max where Parquet's bytes are Iceberg's single-value encoding (little-endian
/// numbers, UTF-8 strings) and exact; across row groups the smallest lower and largest
/// upper bound are kept.
fn column_facts(metadata: &ParquetMetaData, columns: &[TableColumn]) -> BTreeMap<i32, ColumnFacts> {
    let mut facts: BTreeMap<i32, ColumnFacts> = BTreeMap::new();
    let mut bounds: BTreeMap<i32, (Option<iceberg::spec::Datum>, Option<iceberg::spec::Datum>)> =
        BTreeMap::new();
    for row_group in metadata.row_groups() {
        for (chunk, column) in row_group.columns().iter().zip(columns) {
            let entry = facts.entry(column.field_id).or_default();
            entry.values += u64::try_from(chunk.num_values()).unwrap_or(0);
            entry.bytes += u64::try_from(chunk.compressed_size()).unwrap_or(0);
            let Some(stats) = chunk.statistics() else {
                continue;
            };
            entry.nulls += stats.null_count_opt().unwrap_or(0);
            if !bounds_encode_alike(&column.iceberg) {
                continue;
            }
            let (low, high) = bounds.entry(column.field_id).or_default();
            let datum = |b: Option<&[u8]>| {
                b.and_then(|b| iceberg::spec::Datum::try_from_bytes(b, column.iceberg.clone()).ok())
            };
            if stats.min_is_exact() {
                if let Some(min) = datum(stats.min_bytes_opt()) {
                    if low.as_ref().is_none_or(|l| min < *l) {
                        *low = Some(min);
                    }
                }
            }
            if stats.max_is_exact() {
                if let Some(max) = datum(stats.max_bytes_opt()) {
                    if high.as_ref().is_none_or(|h| max > *h) {
                        *high = Some(max);
                    }
                }
            }
        }
    }
    for (id, (low, high)) in bounds {
        if let Some(entry) = facts.get_mut(&id) {
            entry.lower = low.map(|d| hex(&d.to_bytes().unwrap_or_default()));
            entry.upper = high.map(|d| hex(&d.to_bytes().unwrap_or_default()));
        }
    }
    facts
}

/// Types whose Parquet statistics bytes are Iceberg's single-value encoding.
fn bounds_encode_alike(t: &PrimitiveType) -> bool {
    matches!(
        t,
        PrimitiveType::Int
            | PrimitiveType::Long
            | PrimitiveType::Float
            | PrimitiveType::Double
            | PrimitiveType::Date
            | PrimitiveType::Timestamp
            | PrimitiveType::Timestamptz
            | PrimitiveType::String
    )
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of lower-case hex `text`; `None` when it is not hex.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::{Int64Array, StringArray};
    use riffle_core::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn target(dir: &std::path::Path, bytes: u64) -> DataFileTarget {
        DataFileTarget {
            dir: Location::Local(dir.to_path_buf()),
            location: format!("file://{}", dir.display()),
            columns: vec![
                TableColumn {
                    name: "n".into(),
                    field_id: 5,
                    iceberg: PrimitiveType::Long,
                },
                TableColumn {
                    name: "s".into(),
                    field_id: 6,
                    iceberg: PrimitiveType::String,
                },
            ],
            target_file_bytes: bytes,
            partitioner: None,
            codec: Codec::Snappy,
        }
    }

    fn batch(values: &[i64]) -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
        ]);
        let strings: Vec<Option<String>> = values
            .iter()
            .map(|v| (v % 2 == 0).then(|| format!("v{v}")))
            .collect();
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(Int64Array::from(values.to_vec())),
                Arc::new(StringArray::from(strings)),
            ],
        )
        .unwrap()
    }

    #[test]
    fn a_closed_file_reports_rows_size_counts_and_exact_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = DataFileWriter::new(target(dir.path(), 1 << 30), 2, 7);
        writer.write(&batch(&[5, -3, 12])).unwrap();
        writer.write(&batch(&[40, 8])).unwrap();
        let files = writer.take_finished().unwrap();
        assert_eq!(files.len(), 1);
        let file = &files[0];
        assert!(file.location.ends_with("/riffle-002-g7-00000.parquet"));
        assert_eq!(file.records, 5);
        let on_disk = std::fs::metadata(dir.path().join("riffle-002-g7-00000.parquet")).unwrap();
        assert_eq!(file.bytes, on_disk.len());
        let n = &file.columns[&5];
        assert_eq!((n.values, n.nulls), (5, 0));
        assert_eq!(
            n.lower.as_deref(),
            Some(hex(&(-3i64).to_le_bytes()).as_str())
        );
        assert_eq!(n.upper.as_deref(), Some(hex(&40i64.to_le_bytes()).as_str()));
        let s = &file.columns[&6];
        assert_eq!((s.values, s.nulls), (5, 2));
        assert_eq!(s.lower.as_deref(), Some(hex(b"v12").as_str()));
        assert_eq!(s.upper.as_deref(), Some(hex(b"v8").as_str()));
        assert!(writer.take_finished().unwrap().is_empty());
    }

    #[test]
    fn files_roll_at_the_target_size_and_names_carry_the_generation() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = DataFileWriter::new(target(dir.path(), 1), 0, 3);
        writer.write(&batch(&[1])).unwrap();
        writer.write(&batch(&[2])).unwrap();
        let files = writer.take_finished().unwrap();
        let names: Vec<&str> = files
            .iter()
            .map(|f| f.location.rsplit('/').next().unwrap())
            .collect();
        assert_eq!(
            names,
            ["riffle-000-g3-00000.parquet", "riffle-000-g3-00001.parquet"]
        );
        assert_eq!(data_file_generation(names[1]), Some(3));
        assert_eq!(data_file_generation("part-000.parquet"), None);
        assert_eq!(
            data_file_generation("riffle-000-g3-00001.parquet.tmp"),
            None
        );
        assert_eq!(unhex(&hex(&[0, 255, 16])), Some(vec![0, 255, 16]));
    }
}
