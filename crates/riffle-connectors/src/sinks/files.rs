//! A sink writing rolling JSONL, CSV or Parquet files into a directory.
//!
//! Each subtask writes `.part-{subtask:03}-g{generation}-{sequence:05}.{ext}.inprogress`
//! (hidden, as readers such as Spark and Trino skip names starting with `.`), so a
//! reader of the directory never sees a half-written file under a final name, and
//! two runs (a zombie and its successor) never stage under one name. Without checkpoints
//! a file is renamed to `part-{subtask:03}-{sequence:05}.{ext}` when it rolls or input
//! ends. With checkpoints (exactly-once) files are only closed and fsynced at a barrier
//! (pre-commit); the coordinator renames them to `part-{subtask:03}-e{epoch:06}-{k:03}.{ext}`
//! once the epoch's manifest is PREPARED, and recovery deletes staged files no epoch
//! committed.
//!
//! Partitioned (`PARTITIONED BY`), the same happens in each partition's directory
//! (`dt=…/hm=…/`, see `partitions.rs`), and the commit of an epoch writes `_SUCCESS` into
//! the partitions every subtask's watermark has closed. Publishing, marking and what
//! recovery takes back are in `file_commit.rs`; this file writes.

use super::file_commit::{sync_dir, StagedFile, StagedFiles, WatermarkMark, STAGED_EXTENSION};
use super::output_owner;
use super::partitions::{Partitioning, SUCCESS_FILE};
use super::{debezium_envelope, without_timestamp};
use riffle_core::arrow::csv::Writer as CsvWriter;
use riffle_core::arrow::json::writer::{LineDelimited, WriterBuilder};
use riffle_core::arrow::json::LineDelimitedWriter;
use riffle_core::parquet::arrow::ArrowWriter;
use riffle_core::{
    Committer, Epoch, Error, EventTime, OutputOwner, OutputPlace, RecordBatch, Result, Sink,
    SinkContext, SinkFactory, SinkSummary, StreamSchema, ROW_KIND_FIELD,
};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// File format of the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// One JSON object per line.
    Jsonl,
    /// Comma-separated with a header row.
    Csv,
    /// Apache Parquet.
    Parquet,
}

impl FileFormat {
    /// The file extension.
    pub fn extension(self) -> &'static str {
        match self {
            FileFormat::Jsonl => "jsonl",
            FileFormat::Csv => "csv",
            FileFormat::Parquet => "parquet",
        }
    }

    /// Parses `jsonl`/`json`, `csv` or `parquet`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "json" | "jsonl" => Ok(FileFormat::Jsonl),
            "csv" => Ok(FileFormat::Csv),
            "parquet" => Ok(FileFormat::Parquet),
            other => Err(Error::config(
                "format",
                format!("unknown file format `{other}`; use jsonl, csv or parquet"),
            )),
        }
    }
}

/// When a subtask closes its current file and starts the next.
#[derive(Debug, Clone, Copy)]
pub struct RollingPolicy {
    /// Roll once a file holds at least this many bytes.
    pub max_file_bytes: u64,
    /// Roll once a file has been open this long.
    pub max_file_age: Option<Duration>,
}

impl Default for RollingPolicy {
    fn default() -> Self {
        Self {
            max_file_bytes: 128 * 1024 * 1024,
            max_file_age: None,
        }
    }
}

/// Builds file sinks writing into one directory.
#[derive(Debug)]
pub struct FileSinkFactory {
    pub(super) dir: PathBuf,
    format: FileFormat,
    rolling: RollingPolicy,
    debezium: bool,
    pub(super) partitioning: Option<Partitioning>,
    /// Whether this process's committer looked at every partition once: partitions
    /// written before a restart are found that way, later ones from the committables.
    pub(super) scanned: AtomicBool,
}

/// Open files a subtask keeps at most, over its partitions: past it, the least recently
/// written one is closed (and committed with the next checkpoint).
const MAX_OPEN_FILES: usize = 64;

impl FileSinkFactory {
    /// Writes `format` files into `dir` (created if missing).
    pub fn new(dir: impl Into<PathBuf>, format: FileFormat, rolling: RollingPolicy) -> Self {
        Self {
            dir: dir.into(),
            format,
            rolling,
            debezium: false,
            partitioning: None,
            scanned: AtomicBool::new(false),
        }
    }

    /// Writes each partition's rows into its own directory (`PARTITIONED BY`).
    pub fn partitioned(self, partitioning: Partitioning) -> Self {
        Self {
            partitioning: Some(partitioning),
            ..self
        }
    }

    /// JSON lines in the Debezium envelope (`{"before", "after", "op"}`), which can hold
    /// a changelog's withdrawn rows (see `debezium.rs`).
    pub fn debezium_json(dir: impl Into<PathBuf>, rolling: RollingPolicy) -> Self {
        Self {
            debezium: true,
            ..Self::new(dir, FileFormat::Jsonl, rolling)
        }
    }
}

impl SinkFactory for FileSinkFactory {
    fn describe(&self) -> String {
        let format = if self.debezium {
            "debezium-json"
        } else {
            self.format.extension()
        };
        match &self.partitioning {
            None => format!("files({format}, {})", self.dir.display()),
            Some(p) => format!(
                "files({format}, {}, partitioned by {})",
                self.dir.display(),
                p.columns.join(", ")
            ),
        }
    }

    fn output_places(&self) -> Vec<OutputPlace> {
        vec![OutputPlace::directory(&self.dir)]
    }

    fn create(&self, _: &StreamSchema, ctx: &SinkContext) -> Result<Box<dyn Sink>> {
        let commits = self
            .partitioning
            .as_ref()
            .is_some_and(|p| p.commit.is_some());
        if commits && !ctx.exactly_once {
            return Err(Error::config(
                "sink.partition-commit.policy.kind",
                "success-file marks partitions when a checkpoint commits: run with checkpoints (--checkpoint-interval)",
            ));
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        Ok(Box::new(FileSink {
            dir: self.dir.clone(),
            format: self.format,
            debezium: self.debezium,
            rolling: self.rolling,
            subtask: ctx.subtask,
            parallelism: ctx.parallelism,
            generation: ctx.generation,
            exactly_once: ctx.exactly_once,
            sequence: 0,
            partitioning: self.partitioning.clone(),
            open: BTreeMap::new(),
            uses: 0,
            closed: Vec::new(),
            pending: std::collections::BTreeSet::new(),
            watermark: EventTime::MIN,
            summary: SinkSummary::default(),
        }))
    }

    fn output_owner(&self) -> Result<Option<OutputOwner>> {
        output_owner::read(&self.dir)
    }

    fn claim_output(&self, owner: &OutputOwner, replace: bool) -> Result<Option<OutputOwner>> {
        output_owner::claim(&self.dir, owner, replace).map(Some)
    }

    fn committer(&self) -> Option<&dyn Committer> {
        Some(self)
    }
}

/// Counts bytes that reach the file.
struct Counting {
    inner: BufWriter<File>,
    bytes: Arc<AtomicU64>,
}

impl Write for Counting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

enum FormatWriter {
    Jsonl(LineDelimitedWriter<Counting>),
    Csv(CsvWriter<Counting>),
    Parquet(ArrowWriter<Counting>),
}

struct OpenFile {
    /// The partition's directory, relative (empty: unpartitioned).
    partition: String,
    /// When it was last written ([`FileSink::uses`]).
    used: u64,
    staged: PathBuf,
    target: PathBuf,
    writer: FormatWriter,
    opened: Instant,
    bytes: Arc<AtomicU64>,
}

impl OpenFile {
    fn bytes(&self) -> u64 {
        let written = self.bytes.load(Ordering::Relaxed);
        match &self.writer {
            FormatWriter::Parquet(w) => written + w.in_progress_size() as u64,
            FormatWriter::Jsonl(_) | FormatWriter::Csv(_) => written,
        }
    }
}

struct FileSink {
    dir: PathBuf,
    format: FileFormat,
    /// Rows are written in the Debezium envelope.
    debezium: bool,
    rolling: RollingPolicy,
    subtask: usize,
    parallelism: usize,
    /// The run's generation, in the names of staged files.
    generation: u64,
    /// Publish only through commit (checkpoints on).
    exactly_once: bool,
    sequence: u64,
    partitioning: Option<Partitioning>,
    /// The open file of each partition ("" when unpartitioned).
    open: BTreeMap<String, OpenFile>,
    /// Writes so far, to tell which open file was written least recently.
    uses: u64,
    /// Staged files closed since the last barrier (exactly-once mode), relative.
    closed: Vec<String>,
    /// Partitions this subtask published into that have no `_SUCCESS` yet.
    pending: std::collections::BTreeSet<String>,
    /// The sink's watermark (for the partition commit).
    watermark: EventTime,
    summary: SinkSummary,
}

impl FileSink {
    fn open(&mut self, partition: &str, batch: &RecordBatch) -> Result<OpenFile> {
        // Exactly-once staged names carry the run's generation (see the module doc);
        // without checkpoints a file is published under its staged name.
        let generation = if self.exactly_once {
            format!("-g{}", self.generation)
        } else {
            String::new()
        };
        let name = format!(
            "part-{:03}{generation}-{:05}.{}",
            self.subtask,
            self.sequence,
            self.format.extension()
        );
        self.sequence += 1;
        let dir = self.dir.join(partition);
        if !partition.is_empty() && !dir.is_dir() {
            std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
            // A new directory is durable once the one holding it is synced.
            let mut parent = dir.parent();
            while let Some(p) = parent.filter(|p| p.starts_with(&self.dir)) {
                sync_dir(p)?;
                parent = p.parent();
            }
        }
        let target = dir.join(&name);
        let staged = dir.join(format!(".{name}.{STAGED_EXTENSION}"));
        let file = File::create(&staged).map_err(|e| Error::io(&staged, e))?;
        let bytes = Arc::new(AtomicU64::new(0));
        let out = Counting {
            inner: BufWriter::with_capacity(1 << 20, file),
            bytes: bytes.clone(),
        };
        let writer = match self.format {
            // Debezium readers expect `"before": null`, not a missing member.
            FileFormat::Jsonl => FormatWriter::Jsonl(
                WriterBuilder::new()
                    .with_explicit_nulls(self.debezium)
                    .build::<_, LineDelimited>(out),
            ),
            FileFormat::Csv => FormatWriter::Csv(CsvWriter::new(out)),
            FileFormat::Parquet => {
                FormatWriter::Parquet(ArrowWriter::try_new(out, batch.schema(), None)?)
            }
        };
        Ok(OpenFile {
            partition: partition.to_string(),
            used: self.uses,
            staged,
            target,
            writer,
            opened: Instant::now(),
            bytes,
        })
    }

    fn close_all(&mut self) -> Result<()> {
        for (_, open) in std::mem::take(&mut self.open) {
            self.close(open)?;
        }
        Ok(())
    }

    fn close(&mut self, open: OpenFile) -> Result<()> {
        let mut out = match open.writer {
            FormatWriter::Jsonl(mut w) => {
                w.finish()?;
                w.into_inner()
            }
            FormatWriter::Csv(w) => w.into_inner(),
            FormatWriter::Parquet(w) => w.into_inner()?,
        };
        out.flush().map_err(|e| Error::io(&open.staged, e))?;
        let file = out
            .inner
            .into_inner()
            .map_err(|e| Error::io(&open.staged, e.into_error()))?;
        file.sync_all().map_err(|e| Error::io(&open.staged, e))?;
        if self.exactly_once {
            let name = open
                .staged
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            self.closed.push(match open.partition.is_empty() {
                true => name,
                false => format!("{}/{name}", open.partition),
            });
        } else {
            std::fs::rename(&open.staged, &open.target).map_err(|e| Error::io(&open.target, e))?;
            self.summary.files.push(open.target);
        }
        Ok(())
    }
}

impl FileSink {
    /// Closes the open file written least recently.
    fn close_least_recent(&mut self) -> Result<()> {
        let oldest = self
            .open
            .iter()
            .min_by_key(|(_, f)| f.used)
            .map(|(p, _)| p.clone());
        match oldest.and_then(|p| self.open.remove(&p)) {
            Some(file) => self.close(file),
            None => Ok(()),
        }
    }

    /// Writes rows of one partition into its open file, rolling it when due.
    fn write_to(&mut self, partition: String, batch: &RecordBatch) -> Result<()> {
        self.uses += 1;
        let mut open = match self.open.remove(&partition) {
            Some(open) => open,
            None => {
                if self.open.len() >= MAX_OPEN_FILES {
                    self.close_least_recent()?;
                }
                self.open(&partition, batch)?
            }
        };
        open.used = self.uses;
        match &mut open.writer {
            FormatWriter::Jsonl(w) => w.write(batch)?,
            FormatWriter::Csv(w) => w.write(batch)?,
            FormatWriter::Parquet(w) => w.write(batch)?,
        }
        self.summary.rows += batch.num_rows() as u64;
        let too_big = open.bytes() >= self.rolling.max_file_bytes;
        let too_old = self
            .rolling
            .max_file_age
            .is_some_and(|age| open.opened.elapsed() >= age);
        if too_big || too_old {
            self.close(open)
        } else {
            self.open.insert(partition, open);
            Ok(())
        }
    }
}

impl Sink for FileSink {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut batch = without_timestamp(batch)?;
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if self.debezium {
            batch = debezium_envelope(&batch)?;
        } else if batch.schema().index_of(ROW_KIND_FIELD).is_ok() {
            // The planner refuses this; a row kind must never be written as a column.
            return Err(Error::plan(
                "a changelog reached a file sink without a changelog format (debezium-json)",
            ));
        }
        let parts = match &self.partitioning {
            None => vec![(String::new(), batch)],
            Some(partitioning) => partitioning.split(&batch)?,
        };
        for (partition, rows) in parts {
            self.write_to(partition, &rows)?;
        }
        Ok(())
    }

    fn on_watermark(&mut self, watermark: EventTime) -> Result<()> {
        self.watermark = self.watermark.max(watermark);
        Ok(())
    }

    fn pre_commit(&mut self, epoch: Epoch) -> Result<Option<String>> {
        if !self.exactly_once {
            return Ok(None);
        }
        self.close_all()?;
        // With a partition commit every subtask speaks at every barrier: its watermark
        // decides, with the others', which partitions close.
        let commits = self
            .partitioning
            .as_ref()
            .is_some_and(|p| p.commit.is_some());
        if commits {
            for staged in &self.closed {
                if let Some((partition, _)) = staged.rsplit_once('/') {
                    self.pending.insert(partition.to_string());
                }
            }
            // Marked by an earlier commit: no longer this subtask's concern.
            let dir = &self.dir;
            self.pending
                .retain(|p| !dir.join(p).join(SUCCESS_FILE).exists());
        }
        let mark = commits.then(|| WatermarkMark {
            watermark: self.watermark,
            parallelism: self.parallelism,
            pending: self.pending.iter().cloned().collect(),
        });
        if self.closed.is_empty() && mark.is_none() {
            return Ok(None);
        }
        let mut files = Vec::with_capacity(self.closed.len());
        for (k, staged) in std::mem::take(&mut self.closed).into_iter().enumerate() {
            let name = format!(
                "part-{:03}-e{:06}-{k:03}.{}",
                self.subtask,
                epoch.0,
                self.format.extension()
            );
            let target = match staged.rsplit_once('/') {
                Some((partition, _)) => format!("{partition}/{name}"),
                None => name,
            };
            self.summary.files.push(self.dir.join(&target));
            files.push(StagedFile { staged, target });
        }
        serde_json::to_string(&StagedFiles { files, mark })
            .map(Some)
            .map_err(|e| Error::config("sink committable", e.to_string()))
    }

    fn finish(&mut self) -> Result<SinkSummary> {
        // Exactly-once: rows after the last barrier stay staged; recovery removes them.
        self.close_all()?;
        Ok(std::mem::take(&mut self.summary))
    }
}

/// Reads back every committed JSONL file in `dir` as lines (for tests and tools).
///
/// # Errors
/// The directory or a file cannot be read.
pub fn read_jsonl_lines(dir: &Path) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    entries.sort();
    for path in entries {
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        lines.extend(text.lines().map(str::to_string));
    }
    Ok(lines)
}
