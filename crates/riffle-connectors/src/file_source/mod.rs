//! A replayable source over a directory or glob of JSONL, CSV or Parquet files.
//!
//! Files are read in name order; subtask `i` of `p` reads files `i, i + p, …`. The
//! schema is given or inferred from the first file; the event-time column is named by
//! the user and becomes `_timestamp` (timestamps of any unit, RFC 3339 strings, or
//! integers as epoch milliseconds). A malformed record fails the job with an error
//! naming file, line and field, or — with [`MalformedRecords::Skip`] — is skipped and
//! counted. The checkpointed offsets are, per file a subtask owns, how far it has read
//! it (by path), so a checkpoint restores at any parallelism: each new subtask takes its
//! own files' positions from the state of all old subtasks.
//!
//! JSONL and CSV are read line by line: a CSV record may not span lines.

mod compression;
mod lines;
mod presence;
pub(crate) mod reader;

use crate::decode::{columns_to_read, reading_note};
use crate::sinks::FileFormat;
use compression::Compression;
use presence::ColumnPresence;
use reader::{FilePosition, FileReader, SavedOffsets};
use riffle_core::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use riffle_core::arrow::json::reader::infer_json_schema;
use riffle_core::operator::OperatorCounters;
use riffle_core::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use riffle_core::{
    Error, OperatorContext, OperatorState, Result, Source, SourceFactory, SourcePoll, StreamSchema,
    TIMESTAMP_FIELD,
};
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
}

/// Builds file source subtasks.
#[derive(Debug)]
pub struct FileSourceFactory {
    config: FileSourceConfig,
    files: Vec<PathBuf>,
    file_schema: SchemaRef,
    event_time_index: usize,
    schema: StreamSchema,
    /// JSON with declared columns: which of them any row had a value for.
    presence: Option<Arc<ColumnPresence>>,
    /// The columns read (ascending), when not all; the others are NULL.
    read: Option<Vec<usize>>,
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

fn infer_schema(file: &Path, format: FileFormat) -> Result<Schema> {
    let open = || File::open(file).map_err(|e| Error::io(file, e));
    let text = || {
        Compression::of(file)
            .reader(open()?)
            .map(BufReader::new)
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
        Ok(Self {
            config,
            files,
            file_schema,
            event_time_index,
            schema,
            presence,
            read: None,
        })
    }

    /// The files this source reads, in order.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }
}

impl SourceFactory for FileSourceFactory {
    fn describe(&self) -> String {
        let columns = reading_note(self.read.as_deref(), self.file_schema.fields().len());
        format!(
            "files({}, {}, {} files{columns})",
            self.config.format.extension(),
            self.config.path,
            self.files.len()
        )
    }

    /// Reads the event-time column (and the NOT NULL ones) too.
    fn reading_only(&self, used: &[usize]) -> Option<Arc<dyn SourceFactory>> {
        let read = columns_to_read(self.file_schema.fields(), |i, _| {
            used.contains(&i) || i == self.event_time_index
        })?;
        let presence = self.presence.as_ref().map(|p| Arc::new(p.only(&read)));
        Some(Arc::new(Self {
            config: self.config.clone(),
            files: self.files.clone(),
            file_schema: self.file_schema.clone(),
            event_time_index: self.event_time_index,
            schema: self.schema.clone(),
            presence,
            read: Some(read),
        }))
    }

    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }

    fn can_rescale(&self) -> bool {
        true
    }

    /// Subtask `i` reads files `i, i + p, …` of the sorted list, so a file added to the
    /// input moves the files after it to other subtasks: each must see where every old
    /// subtask was, or it would read a moved file again from its start.
    fn restores_from_every_subtask(&self) -> bool {
        true
    }

    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Source>> {
        let files: Vec<PathBuf> = self
            .files
            .iter()
            .skip(ctx.subtask)
            .step_by(ctx.parallelism.max(1))
            .cloned()
            .collect();
        let positions = vec![FilePosition::default(); files.len()];
        let mut config = self.config.clone();
        if let Some(rate) = config.max_rows_per_second {
            // Small batches under a rate, so rows flow evenly (about 20 batches a second).
            let share = rate / ctx.parallelism.max(1) as u64;
            config.batch_rows = config.batch_rows.min((share / 20).max(1) as usize);
        }
        Ok(Box::new(FileSource {
            files,
            all_files: self.files.iter().map(|p| p.display().to_string()).collect(),
            positions,
            parallelism: ctx.parallelism.max(1),
            throttle: None,
            next_file: 0,
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
        }))
    }
}

struct FileSource {
    /// This subtask's files: `i, i + p, …` of the source's.
    files: Vec<PathBuf>,
    /// Every file of the source (any subtask's), to tell a vanished file from another
    /// subtask's.
    all_files: std::collections::HashSet<String>,
    /// Where reading each of `files` starts (a restore) — or, once read, that it is done.
    positions: Vec<FilePosition>,
    parallelism: usize,
    /// With a rate: when this subtask started and the rows it has produced since.
    throttle: Option<(std::time::Instant, u64)>,
    next_file: usize,
    reader: Option<FileReader>,
    config: FileSourceConfig,
    file_schema: SchemaRef,
    event_time_index: usize,
    schema: StreamSchema,
    counters: Arc<OperatorCounters>,
    operator: String,
    /// JSON: which declared columns had a value (shared by the subtasks).
    presence: Option<Arc<ColumnPresence>>,
    /// Whether this subtask told `presence` it has read its last file.
    reported: bool,
    /// The columns read (ascending), when not all.
    read: Option<Vec<usize>>,
}

impl FileSource {
    fn open(&self, index: usize, skip: u64) -> Result<FileReader> {
        FileReader::open(
            &self.files[index],
            self.config.format,
            self.file_schema.clone(),
            self.config.batch_rows,
            skip,
            self.read.clone(),
        )
    }
}

impl Source for FileSource {
    fn poll_next(&mut self) -> Result<SourcePoll> {
        if let Some(rate) = self.config.max_rows_per_second {
            // This subtask's share of the rate; the runtime sleeps between Pending polls.
            let share = (rate as f64 / self.parallelism as f64).max(1.0);
            let (started, produced) = *self
                .throttle
                .get_or_insert_with(|| (std::time::Instant::now(), 0));
            if produced as f64 >= started.elapsed().as_secs_f64() * share {
                return Ok(SourcePoll::Pending);
            }
        }
        let polled = self.read_next()?;
        if let (Some((_, produced)), SourcePoll::Batch(batch)) = (&mut self.throttle, &polled) {
            *produced += batch.num_rows() as u64;
        }
        Ok(polled)
    }

    fn snapshot(&mut self, _epoch: riffle_core::Epoch) -> Result<OperatorState> {
        self.offsets()
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        self.restore_offsets(state)
    }
}

impl FileSource {
    /// The next batch of the files, without throttling.
    fn read_next(&mut self) -> Result<SourcePoll> {
        loop {
            if self.reader.is_none() {
                while self.positions.get(self.next_file).is_some_and(|p| p.done) {
                    self.next_file += 1;
                }
                if self.next_file >= self.files.len() {
                    self.report_absent_columns();
                    return Ok(SourcePoll::End);
                }
                let start = self.positions[self.next_file].position;
                self.reader = Some(self.open(self.next_file, start)?);
                self.next_file += 1;
            }
            let Some(reader) = self.reader.as_mut() else {
                continue;
            };
            let skip = self.config.on_malformed == MalformedRecords::Skip;
            match reader.next_batch(skip, self.event_time_index, &self.schema, &self.counters)? {
                Some(batch) if batch.num_rows() > 0 => {
                    if let Some(presence) = &self.presence {
                        presence.count(&batch);
                    }
                    return Ok(SourcePoll::Batch(batch));
                }
                Some(_) => {}
                None => {
                    self.reader = None;
                    self.positions[self.next_file - 1].done = true;
                }
            }
        }
    }

    /// Once, at the end of this subtask's files: the last subtask to get there warns of
    /// each declared JSON column that no row read had a value for.
    fn report_absent_columns(&mut self) {
        if std::mem::replace(&mut self.reported, true) {
            return;
        }
        let Some(presence) = &self.presence else {
            return;
        };
        if let Some((absent, rows)) = presence.finish(self.parallelism) {
            for column in absent {
                tracing::warn!(
                    "{}: the declared column `{column}` is NULL in all {rows} rows read; does any record carry the key `{column}`? (JSON keys match exactly, case included)",
                    self.config.path
                );
            }
        }
    }

    fn offsets(&self) -> Result<OperatorState> {
        let mut files = Vec::with_capacity(self.files.len());
        for (i, path) in self.files.iter().enumerate() {
            let mut at = self.positions[i];
            if let Some(reader) = self.reader.as_ref().filter(|_| i + 1 == self.next_file) {
                at.position = reader.position();
            }
            files.push((path.display().to_string(), at));
        }
        reader::file_positions_state(&files)
    }

    fn restore_offsets(&mut self, state: OperatorState) -> Result<()> {
        match reader::read_saved_offsets(&state, &self.operator)? {
            SavedOffsets::Files(saved) => {
                if let Some(gone) = saved.keys().find(|p| !self.all_files.contains(*p)) {
                    return Err(Error::State { operator: self.operator.clone(), message: format!("the checkpoint was reading {gone}, which is no longer in the input; put it back, or start from empty state") });
                }
                // A file no old subtask owned is new since the checkpoint: read whole.
                for (i, path) in self.files.iter().enumerate() {
                    if let Some(at) = saved.get(&path.display().to_string()) {
                        self.positions[i] = *at;
                    }
                }
            }
            // An older version's single offset: exact only at the parallelism it was
            // taken at, where the subtask's file list is the same; the path check
            // refuses any other.
            SavedOffsets::Single {
                path,
                file,
                position,
            } => {
                let file = file as usize;
                if file < self.files.len() && self.files[file].display().to_string() != path {
                    return Err(Error::State { operator: self.operator.clone(), message: format!("checkpoint was reading {path}, but file #{file} is now {}; the input directory changed", self.files[file].display()) });
                }
                for (i, at) in self.positions.iter_mut().enumerate() {
                    *at = match i.cmp(&file) {
                        std::cmp::Ordering::Less => FilePosition {
                            position: 0,
                            done: true,
                        },
                        std::cmp::Ordering::Equal => FilePosition {
                            position,
                            done: false,
                        },
                        std::cmp::Ordering::Greater => FilePosition::default(),
                    };
                }
            }
        }
        Ok(())
    }
}
