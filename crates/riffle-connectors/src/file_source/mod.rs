//! A replayable source over a directory or glob of JSONL, CSV or Parquet files.
//!
//! Files are read in name order, cut into splits (byte ranges of plain text, runs of
//! Parquet row groups; a compressed file is one split): subtask `i` of `p` reads splits
//! `i, i + p, …`, so one big file is read on all cores. The
//! schema is given or inferred from the first file; the event-time column is named by
//! the user and becomes `_timestamp` (timestamps of any unit, RFC 3339 strings, or
//! integers as epoch milliseconds). A malformed record fails the job with an error
//! naming file, line and field, or — with [`MalformedRecords::Skip`] — is skipped and
//! counted. The checkpointed offsets are, per split a subtask owns, its bounds and how
//! far it has read it (by path), so a checkpoint restores at any parallelism: each new
//! subtask takes its own splits from the state of all old subtasks.
//!
//! JSONL and CSV are read line by line: a CSV record may not span lines.

mod compression;
mod lines;
mod offsets;
mod parquet_split;
mod prefetch;
mod presence;
mod read_ahead;
pub(crate) mod reader;
mod row_groups;
mod split;
mod subtask;

use crate::decode::{columns_to_read, reading_note};
use crate::sinks::FileFormat;
use compression::Compression;
use presence::ColumnPresence;
use riffle_core::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use riffle_core::arrow::json::reader::infer_json_schema;
use riffle_core::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use riffle_core::{
    Error, OperatorContext, Result, Source, SourceFactory, StreamSchema, TimeBounds,
    TIMESTAMP_FIELD,
};
use split::{assign, plan, split_size, Layout};
use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use subtask::FileSource;

/// What to do with a record that cannot be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MalformedRecords {
    /// Fail the job, naming file, line and field.
    Fail,
    /// Skip the record and count it (`records_skipped` in the run summary).
    Skip,
}

/// Settings of a file source.
#[derive(Debug, Clone)]
pub struct FileSourceConfig {
    /// A directory (every file with the format's extension), a file, or a glob.
    pub path: String,
    /// File format.
    pub format: FileFormat,
    /// Columns of the files; `None` infers them from the first file.
    pub schema: Option<SchemaRef>,
    /// Name of the column holding event time.
    pub event_time_column: String,
    /// Malformed records: fail or skip.
    pub on_malformed: MalformedRecords,
    /// Rows per output batch.
    pub batch_rows: usize,
    /// At most this many rows per wall second over all subtasks (each takes its share).
    pub max_rows_per_second: Option<u64>,
    /// The size to cut plain-text files into; `None` picks one from the input's size
    /// and the parallelism.
    pub split_bytes: Option<u64>,
}

/// Builds file source subtasks.
#[derive(Debug, Clone)]
pub struct FileSourceFactory {
    config: FileSourceConfig,
    files: Vec<PathBuf>,
    /// How each file can be cut, by path.
    layouts: Arc<HashMap<PathBuf, Layout>>,
    file_schema: SchemaRef,
    event_time_index: usize,
    schema: StreamSchema,
    /// JSON with declared columns: which of them any row had a value for.
    presence: Option<Arc<ColumnPresence>>,
    /// The columns read (ascending), when not all; the others are NULL.
    read: Option<Vec<usize>>,
    /// Parquet: a timestamp column and the range outside which row groups are passed
    /// over.
    times: Option<(usize, TimeBounds)>,
}

/// Lists the files a path names, in order.
pub(crate) fn list_files(path: &str, format: FileFormat) -> Result<Vec<PathBuf>> {
    let p = Path::new(path);
    let mut files: Vec<PathBuf> = if p.is_dir() {
        std::fs::read_dir(p)
            .map_err(|e| Error::io(p, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| f.is_file() && compression::holds_format(f, format))
            .collect()
    } else if p.is_file() {
        vec![p.to_path_buf()]
    } else {
        let pattern = glob::glob(path)
            .map_err(|e| Error::config("path", format!("`{path}` is not a valid glob: {e}")))?;
        pattern
            .filter_map(|f| f.ok())
            .filter(|f| f.is_file())
            .collect()
    };
    files.sort();
    if files.is_empty() {
        return Err(Error::config(
            "path",
            format!(
                "no {} files at `{path}`; give a directory, a file or a glob such as data/*.{}",
                format.extension(),
                format.extension()
            ),
        ));
    }
    Ok(files)
}

/// `text` past a UTF-8 byte order mark that begins it (the reader passes over one
/// before a file's first line; inference failed on it, and read a CSV header's first
/// name with it).
fn past_byte_order_mark<R: std::io::Read>(mut text: BufReader<R>) -> std::io::Result<BufReader<R>> {
    use std::io::BufRead;
    if text.fill_buf()?.starts_with(reader::BYTE_ORDER_MARK) {
        text.consume(reader::BYTE_ORDER_MARK.len());
    }
    Ok(text)
}

fn infer_schema(file: &Path, format: FileFormat) -> Result<Schema> {
    let open = || File::open(file).map_err(|e| Error::io(file, e));
    let text = || {
        Compression::of(file)
            .reader(open()?)
            .map(BufReader::new)
            .and_then(past_byte_order_mark)
            .map_err(|e| Error::io(file, e))
    };
    let inferred = match format {
        FileFormat::Jsonl => infer_json_schema(text()?, Some(1000)).map(|(s, _)| s),
        FileFormat::Csv => riffle_core::arrow::csv::reader::Format::default()
            .with_header(true)
            .infer_schema(text()?, Some(1000))
            .map(|(s, _)| s),
        FileFormat::Parquet => {
            let builder = ParquetRecordBatchReaderBuilder::try_new(open()?).map_err(|e| {
                Error::config(
                    "path",
                    format!("{} is not a readable Parquet file: {e}", file.display()),
                )
            })?;
            Ok(builder.schema().as_ref().clone())
        }
    };
    inferred.map_err(|e| {
        Error::config(
            "schema",
            format!(
                "cannot infer a schema from {}: {e}; give the schema explicitly",
                file.display()
            ),
        )
    })
}

impl FileSourceFactory {
    /// Lists the files and settles the schema.
    ///
    /// # Errors
    /// No files, an unreadable first file, or an event-time column that is missing or of
    /// a type that cannot be event time.
    pub fn new(config: FileSourceConfig) -> Result<Self> {
        let files = list_files(&config.path, config.format)?;
        let file_schema = match &config.schema {
            Some(s) => s.clone(),
            None => Arc::new(infer_schema(&files[0], config.format)?),
        };
        let event_time_index = file_schema
            .index_of(&config.event_time_column)
            .map_err(|_| {
                Error::config(
                    "event_time_column",
                    format!(
                        "no column `{}`; the files have {:?}",
                        config.event_time_column,
                        file_schema
                            .fields()
                            .iter()
                            .map(|f| f.name())
                            .collect::<Vec<_>>()
                    ),
                )
            })?;
        let ty = file_schema.field(event_time_index).data_type();
        if !matches!(
            ty,
            DataType::Timestamp(..)
                | DataType::Int64
                | DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Date32
        ) {
            return Err(Error::config("event_time_column", format!("`{}` is {ty}; event time must be a timestamp, an RFC 3339 string or epoch milliseconds", config.event_time_column)));
        }
        if file_schema.index_of(TIMESTAMP_FIELD).is_ok() {
            return Err(Error::config(
                "schema",
                format!("the files have a `{TIMESTAMP_FIELD}` column, which riffle reserves"),
            ));
        }
        let fields: Vec<Field> = file_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let schema = StreamSchema::with_timestamp(fields);
        // Declared JSON columns (not inferred ones, not event time, which must be set).
        let presence = (config.format == FileFormat::Jsonl && config.schema.is_some()).then(|| {
            Arc::new(ColumnPresence::new(
                file_schema
                    .fields()
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != event_time_index)
                    .map(|(i, f)| (f.name().clone(), i))
                    .collect(),
            ))
        });
        let layouts = files
            .iter()
            .map(|f| Ok((f.clone(), Layout::of(f, config.format)?)))
            .collect::<Result<_>>()?;
        Ok(Self {
            config,
            files,
            layouts: Arc::new(layouts),
            file_schema,
            event_time_index,
            schema,
            presence,
            read: None,
            times: None,
        })
    }

    /// The files this source reads, in order.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }
}

impl FileSourceFactory {
    /// The `explain` text; with `count`, how many files the input holds now.
    fn text(&self, count: bool) -> String {
        let columns = reading_note(self.read.as_deref(), self.file_schema.fields().len());
        let times = match self.times {
            Some((column, bounds)) => format!(
                ", passing over row groups and pages with `{}` outside {}",
                self.file_schema.field(column).name(),
                describe_bounds(bounds)
            ),
            None => String::new(),
        };
        let files = if count {
            format!(", {} files", self.files.len())
        } else {
            String::new()
        };
        format!(
            "files({}, {}{files}{columns}{times})",
            self.config.format.extension(),
            self.config.path,
        )
    }
}

impl SourceFactory for FileSourceFactory {
    fn describe(&self) -> String {
        self.text(true)
    }

    /// The description without the file count: files added between runs are read by
    /// the restored job (docs/sql.md), so they do not make it another plan.
    fn plan_identity(&self) -> String {
        self.text(false)
    }

    /// Every file with how it is cut (its size, its row groups).
    fn input_listing(&self) -> Option<String> {
        let mut text = String::new();
        for file in &self.files {
            text.push_str(&format!("{}={:?};", file.display(), self.layouts.get(file)));
        }
        Some(format!(
            "{} files, {:016x}",
            self.files.len(),
            xxhash_rust::xxh3::xxh3_64(text.as_bytes())
        ))
    }

    /// Reads the event-time column (and the NOT NULL ones) too.
    fn reading_only(&self, used: &[usize]) -> Option<Arc<dyn SourceFactory>> {
        let read = columns_to_read(self.file_schema.fields(), |i, _| {
            used.contains(&i) || i == self.event_time_index
        })?;
        let presence = self.presence.as_ref().map(|p| Arc::new(p.only(&read)));
        Some(Arc::new(Self {
            presence,
            read: Some(read),
            ..self.clone()
        }))
    }

    /// Parquet only: its row groups carry min/max statistics.
    fn reading_times_within(
        &self,
        column: usize,
        bounds: TimeBounds,
    ) -> Option<Arc<dyn SourceFactory>> {
        let is_time = matches!(
            self.file_schema.fields().get(column)?.data_type(),
            DataType::Timestamp(..)
        );
        if self.config.format != FileFormat::Parquet || !is_time || !bounds.is_bounded() {
            return None;
        }
        Some(Arc::new(Self {
            times: Some((column, bounds)),
            ..self.clone()
        }))
    }

    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }

    fn can_rescale(&self) -> bool {
        true
    }

    /// Subtask `i` reads splits `i, i + p, …` of the sorted files', so a file added to
    /// the input moves the splits after it to other subtasks: each must see where every
    /// old subtask was, or it would read a moved split again from its start.
    fn restores_from_every_subtask(&self) -> bool {
        true
    }

    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Source>> {
        let parallelism = ctx.parallelism.max(1);
        let layouts: Vec<Layout> = self
            .files
            .iter()
            .map(|f| self.layouts.get(f).cloned().unwrap_or(Layout::Whole))
            .collect();
        let size = split_size(&layouts, parallelism, self.config.split_bytes);
        let plan = plan(&self.files, &layouts, size);
        let splits = assign(&plan, ctx.subtask, parallelism);
        let positions = splits
            .iter()
            .map(|split| {
                let layout = self.layouts.get(&split.path);
                offsets::SplitPosition {
                    position: layout.map_or(0, |l| l.first_position(split)),
                    done: false,
                }
            })
            .collect();
        let mut config = self.config.clone();
        if let Some(rate) = config.max_rows_per_second {
            // Small batches under a rate, so rows flow evenly (about 20 batches a second).
            let share = rate / parallelism as u64;
            config.batch_rows = config.batch_rows.min((share / 20).max(1) as usize);
        }
        Ok(Box::new(FileSource {
            splits,
            positions,
            plan: Arc::new(plan),
            layouts: self.layouts.clone(),
            subtask: ctx.subtask,
            parallelism,
            throttle: None,
            next_split: 0,
            reader: None,
            config,
            file_schema: self.file_schema.clone(),
            event_time_index: self.event_time_index,
            schema: self.schema.clone(),
            counters: ctx.counters.clone(),
            operator: ctx.operator_id.0.clone(),
            presence: self.presence.clone(),
            reported: false,
            read: self.read.clone(),
            times: self.times,
        }))
    }
}

/// `[2025-01-01T00:00:00, …)`-style text of a range, for `explain`.
fn describe_bounds(bounds: TimeBounds) -> String {
    let at = |nanos: Option<i64>| {
        nanos
            .and_then(riffle_core::arrow::temporal_conversions::timestamp_ns_to_datetime)
            .map_or("…".to_string(), |t| t.to_string())
    };
    format!("[{}, {}]", at(bounds.from), at(bounds.to))
}
