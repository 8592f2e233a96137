//! A sink writing rolling JSONL, CSV or Parquet files into a directory.
//!
//! Each subtask writes `part-{subtask:03}-{sequence:05}.{ext}.inprogress` and renames it
//! to its final name when the file rolls or input ends, so a reader of the directory
//! never sees a half-written file under a final name.

use super::without_timestamp;
use riffle_core::arrow::csv::Writer as CsvWriter;
use riffle_core::arrow::json::LineDelimitedWriter;
use riffle_core::parquet::arrow::ArrowWriter;
use riffle_core::{Error, RecordBatch, Result, Sink, SinkFactory, SinkSummary, StreamSchema};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
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
    dir: PathBuf,
    format: FileFormat,
    rolling: RollingPolicy,
}

impl FileSinkFactory {
    /// Writes `format` files into `dir` (created if missing).
    pub fn new(dir: impl Into<PathBuf>, format: FileFormat, rolling: RollingPolicy) -> Self {
        Self {
            dir: dir.into(),
            format,
            rolling,
        }
    }
}

impl SinkFactory for FileSinkFactory {
    fn describe(&self) -> String {
        format!("files({}, {})", self.format.extension(), self.dir.display())
    }

    fn create(&self, _: &StreamSchema, subtask: usize, _: usize) -> Result<Box<dyn Sink>> {
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
        Ok(Box::new(FileSink {
            dir: self.dir.clone(),
            format: self.format,
            rolling: self.rolling,
            subtask,
            sequence: 0,
            current: None,
            summary: SinkSummary::default(),
        }))
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
    rolling: RollingPolicy,
    subtask: usize,
    sequence: u64,
    current: Option<OpenFile>,
    summary: SinkSummary,
}

impl FileSink {
    fn open(&mut self, batch: &RecordBatch) -> Result<OpenFile> {
        let name = format!(
            "part-{:03}-{:05}.{}",
            self.subtask,
            self.sequence,
            self.format.extension()
        );
        self.sequence += 1;
        let target = self.dir.join(&name);
        let staged = self.dir.join(format!("{name}.inprogress"));
        let file = File::create(&staged).map_err(|e| Error::io(&staged, e))?;
        let bytes = Arc::new(AtomicU64::new(0));
        let out = Counting {
            inner: BufWriter::with_capacity(1 << 20, file),
            bytes: bytes.clone(),
        };
        let writer = match self.format {
            FileFormat::Jsonl => FormatWriter::Jsonl(LineDelimitedWriter::new(out)),
            FileFormat::Csv => FormatWriter::Csv(CsvWriter::new(out)),
            FileFormat::Parquet => {
                FormatWriter::Parquet(ArrowWriter::try_new(out, batch.schema(), None)?)
            }
        };
        Ok(OpenFile {
            staged,
            target,
            writer,
            opened: Instant::now(),
            bytes,
        })
    }

    fn close_current(&mut self) -> Result<()> {
        let Some(open) = self.current.take() else {
            return Ok(());
        };
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
        std::fs::rename(&open.staged, &open.target).map_err(|e| Error::io(&open.target, e))?;
        self.summary.files.push(open.target);
        Ok(())
    }
}

impl Sink for FileSink {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let batch = without_timestamp(batch)?;
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if self.current.is_none() {
            self.current = Some(self.open(&batch)?);
        }
        if let Some(open) = &mut self.current {
            match &mut open.writer {
                FormatWriter::Jsonl(w) => w.write(&batch)?,
                FormatWriter::Csv(w) => w.write(&batch)?,
                FormatWriter::Parquet(w) => w.write(&batch)?,
            }
            self.summary.rows += batch.num_rows() as u64;
            let too_big = open.bytes() >= self.rolling.max_file_bytes;
            let too_old = self
                .rolling
                .max_file_age
                .is_some_and(|age| open.opened.elapsed() >= age);
            if too_big || too_old {
                self.close_current()?;
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<SinkSummary> {
        self.close_current()?;
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
