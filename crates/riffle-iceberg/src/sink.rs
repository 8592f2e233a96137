//! The Iceberg sink: subtasks write Parquet data files; the committer appends them to
//! the table as one snapshot per checkpoint's epoch group, exactly once
//! (docs/connectors.md, "iceberg").
//!
//! ```text
//!  subtask 0 ─ data files ─┐  committables      one fast-append snapshot per
//!  subtask 1 ─ data files ─┼─ (in the manifest) ─▶ PREPARED manifest, summary
//!  …                       ┘                    riffle.sink-id + riffle.epochs
//! ```
//!
//! Before every commit the committer reads, from the table's own snapshot ancestry,
//! which epochs of this sink it already holds and appends only the others; when a
//! commit fails, it reads the table again before deciding whether the epochs landed.

use crate::catalog::{self, iceberg_error, CatalogConfig, CatalogKind};
use crate::codec::Codec;
use crate::data_files::{data_file_generation, unhex, DataFileTarget, DataFileWriter, WrittenFile};
use crate::ledger;
use crate::partition::{check_declared, decode, new_spec, DeclaredField, Partitioner};
use crate::schema::{match_table, new_table_schema};
use crate::storage::{self, local_path, locate, Location};
use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, Datum, PartitionSpec,
    Schema as IcebergSchema, Type,
};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::Catalog;
use iceberg::TableIdent;
use riffle_connectors::io_runtime::block_on;
use riffle_connectors::sinks::without_timestamp;
use riffle_core::arrow::datatypes::{Schema, SchemaRef};
use riffle_core::{
    Committable, Committer as SinkCommitter, Epoch, Error, OutputOwner, OutputPlace, RecordBatch,
    Result, Sink, SinkContext, SinkFactory, SinkSummary, StagedOutput, StreamSchema, Unpublished,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// What an Iceberg sink writes where.
#[derive(Debug, Clone)]
pub struct IcebergSinkConfig {
    /// The catalog.
    pub catalog: CatalogConfig,
    /// `namespace.name`.
    pub table: String,
    /// Create the table (and its namespace) from the declared columns when missing.
    pub create: bool,
    /// Roll data files at this size.
    pub target_file_bytes: u64,
    /// The data files' page codec.
    pub codec: Codec,
    /// `PARTITIONED BY`: a new table's partitioning, checked against an existing
    /// table's (empty: a new table is unpartitioned, an existing one is written by its
    /// own spec).
    pub partition_by: Vec<DeclaredField>,
    /// The sink's id in snapshot summaries: stable across runs of one pipeline
    /// (`pipeline/table`).
    pub sink_id: String,
    /// How many checkpoint epochs one snapshot covers (at least 1).
    pub epochs_per_commit: u64,
}

/// Builds Iceberg sink subtasks and commits what they wrote.
pub struct IcebergSinkFactory {
    committer: Arc<Committer>,
}

/// The table's one writer of snapshots: the coordinator's commits, recovery's, and a
/// run without checkpoints at end of input.
struct Committer {
    config: IcebergSinkConfig,
    ident: TableIdent,
    /// The schema and partition spec a missing table is created with (from the
    /// declared columns and partitioning); `None` when the table is not to be created.
    creation: Option<(IcebergSchema, PartitionSpec)>,
    catalog: Mutex<Option<Arc<dyn Catalog>>>,
}

/// The committable of one subtask's epoch: its finished data files.
#[derive(Debug, Serialize, Deserialize)]
struct StagedFiles {
    files: Vec<WrittenFile>,
}

impl StagedFiles {
    fn of(committable: &Committable) -> Result<Self> {
        committable.decode("a list of Iceberg data files")
    }
}

impl IcebergSinkFactory {
    /// A sink writing `config.table`, whose declared columns are `declared`.
    ///
    /// # Errors
    /// A table name without namespace; a warehouse that is neither a local directory
    /// nor an S3 bucket; a declared column Iceberg cannot hold.
    pub fn new(config: IcebergSinkConfig, declared: SchemaRef) -> Result<Self> {
        let ident = catalog::table_ident(&config.table)?;
        if !storage::is_supported(&config.catalog.warehouse) {
            return Err(Error::config(
                "warehouse",
                format!(
                    "'{}': riffle writes Iceberg tables into a local directory, 'file:///path', or an S3 bucket, 's3://bucket/prefix'",
                    config.catalog.warehouse
                ),
            ));
        }
        let uri = &config.catalog.uri;
        let (fits, expected) = match config.catalog.kind {
            CatalogKind::Sql => (
                uri.starts_with("sqlite:") || uri.starts_with("postgres"),
                "'sqlite:///path/catalog.db' or 'postgresql://user@host:port/database'",
            ),
            CatalogKind::Rest => (
                uri.starts_with("http://") || uri.starts_with("https://"),
                "the REST catalog's 'http://host:port' (or https://)",
            ),
        };
        if !fits {
            return Err(Error::config(
                "catalog.uri",
                format!("'{uri}': use {expected}"),
            ));
        }
        let schema =
            new_table_schema(&declared).map_err(|e| Error::config("columns", e.to_string()))?;
        let spec = new_spec(&config.partition_by, &schema)
            .map_err(|e| Error::config("PARTITIONED BY", e.to_string()))?;
        Ok(Self {
            committer: Arc::new(Committer {
                creation: config.create.then_some((schema, spec)),
                config,
                ident,
                catalog: Mutex::new(None),
            }),
        })
    }
}

impl Committer {
    /// The catalog, opened once.
    fn catalog(&self) -> Result<Arc<dyn Catalog>> {
        let mut opened = self.catalog.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(catalog) = opened.as_ref() {
            return Ok(catalog.clone());
        }
        let config = self.config.catalog.clone();
        let catalog = block_on(async move { catalog::open(&config).await })??;
        // A token fetched with credentials expires: open the catalog again next time.
        if !self.config.catalog.opens_per_operation() {
            *opened = Some(catalog.clone());
        }
        Ok(catalog)
    }

    /// Runs `work` with the catalog and table identifier on the I/O runtime.
    fn with_catalog<T, F, Fut>(&self, work: F) -> Result<T>
    where
        F: FnOnce(Arc<dyn Catalog>, TableIdent) -> Fut,
        Fut: std::future::Future<Output = Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        let catalog = self.catalog()?;
        block_on(work(catalog, self.ident.clone()))?
    }

    /// The table, created from the declared columns when missing and `create` is set.
    fn table(&self) -> Result<Table> {
        let creation = self.creation.clone();
        self.with_catalog(move |catalog, ident| async move {
            catalog::ensure_table(catalog.as_ref(), &ident, creation.as_ref()).await
        })
    }

    /// The table, if it exists.
    fn existing_table(&self) -> Result<Option<Table>> {
        self.with_catalog(|catalog, ident| async move {
            catalog::load_if_exists(catalog.as_ref(), &ident).await
        })
    }

    /// Appends the data files of those `committables` whose epochs the table does not
    /// hold yet, as one snapshot.
    fn append(&self, committables: &[&Committable]) -> Result<()> {
        let table = self.table()?;
        let committed = catalog::committed_epochs(&table, &self.config.sink_id);
        let left = ledger::uncommitted(committables, &committed);
        if left.is_empty() {
            return Ok(());
        }
        let epochs: BTreeSet<u64> = left.iter().map(|c| c.epoch.0).collect();
        let mut files = Vec::new();
        for c in &left {
            files.extend(StagedFiles::of(c)?.files);
        }
        self.append_files(table, &files, epochs)
    }

    /// Appends `files` as one snapshot holding `epochs` (none: a run without
    /// checkpoints, at end of input).
    fn append_files(
        &self,
        table: Table,
        files: &[WrittenFile],
        epochs: BTreeSet<u64>,
    ) -> Result<()> {
        let data_files = files
            .iter()
            .map(|f| data_file(&table, f))
            .collect::<Result<Vec<_>>>()?;
        let mut properties =
            HashMap::from([(ledger::SINK_ID.to_string(), self.config.sink_id.clone())]);
        if !epochs.is_empty() {
            properties.insert(ledger::EPOCHS.to_string(), ledger::format_epochs(&epochs));
        }
        let sink_id = self.config.sink_id.clone();
        let started = std::time::Instant::now();
        let count = files.len();
        self.with_catalog(move |catalog, ident| async move {
            let tx = Transaction::new(&table);
            let tx = tx
                .fast_append()
                .add_data_files(data_files)
                .set_snapshot_properties(properties)
                .apply(tx)
                .map_err(|e| iceberg_error("preparing the append", e))?;
            // The crate retries a commit only when the catalog refused it as a conflict
            // (then nothing landed); any other failure may have landed, so the table is
            // read again before deciding.
            let answer = match tx.commit(catalog.as_ref()).await {
                Ok(_) if answer_lost_for_test(&epochs) => Err(iceberg::Error::new(
                    iceberg::ErrorKind::Unexpected,
                    "the catalog's answer was lost (RIFFLE_ICEBERG_LOSE_FIRST_ANSWER)",
                )),
                other => other.map(|_| ()),
            };
            match answer {
                Ok(()) => {
                    // How long the catalog commit alone took (RUST_LOG=riffle_iceberg=debug).
                    tracing::debug!(
                        "iceberg commit: epochs {} of {ident}, {count} data files, in {:.1} ms",
                        ledger::format_epochs(&epochs),
                        started.elapsed().as_secs_f64() * 1e3
                    );
                    Ok(())
                }
                Err(e) => {
                    let now = catalog::load(catalog.as_ref(), &ident).await?;
                    let landed = catalog::committed_epochs(&now, &sink_id);
                    if !epochs.is_empty() && epochs.is_subset(&landed) {
                        tracing::warn!(
                            "appending epoch(s) {} to {ident} failed ({e}), but the table holds them: the commit had landed",
                            ledger::format_epochs(&epochs)
                        );
                        Ok(())
                    } else {
                        Err(iceberg_error(
                            &format!("appending epoch(s) {} to {ident}", ledger::format_epochs(&epochs)),
                            e,
                        ))
                    }
                }
            }
        })
    }
}

/// Test hook: with `RIFFLE_ICEBERG_LOSE_FIRST_ANSWER=1` the process's first successful
/// commit of epochs is turned into a failure, as if the catalog's answer had been lost
/// on the way back, so that tests reach the re-check.
fn answer_lost_for_test(epochs: &BTreeSet<u64>) -> bool {
    static LOST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    !epochs.is_empty()
        && std::env::var_os("RIFFLE_ICEBERG_LOSE_FIRST_ANSWER").is_some_and(|v| v == "1")
        && !LOST.swap(true, std::sync::atomic::Ordering::SeqCst)
}

/// The iceberg crate's descriptor of a data file riffle wrote.
fn data_file(table: &Table, file: &WrittenFile) -> Result<iceberg::spec::DataFile> {
    let schema = table.metadata().current_schema();
    let describing =
        |e: String| Error::external("iceberg", format!("describing {}: {e}", file.location));
    let spec = table
        .metadata()
        .partition_spec_by_id(file.spec_id)
        .ok_or_else(|| describing(format!("the table has no partition spec {}", file.spec_id)))?;
    let partition = decode(spec, schema, &file.partition).map_err(|e| describing(e.to_string()))?;
    let mut column_sizes = HashMap::new();
    let mut value_counts = HashMap::new();
    let mut null_counts = HashMap::new();
    let mut lower = HashMap::new();
    let mut upper = HashMap::new();
    for (id, facts) in &file.columns {
        column_sizes.insert(*id, facts.bytes);
        value_counts.insert(*id, facts.values);
        null_counts.insert(*id, facts.nulls);
        let Some(field) = schema.field_by_id(*id) else {
            continue;
        };
        let Type::Primitive(t) = field.field_type.as_ref() else {
            continue;
        };
        let bound = |hex: &Option<String>| -> Option<Datum> {
            let bytes = unhex(hex.as_deref()?)?;
            Datum::try_from_bytes(&bytes, t.clone()).ok()
        };
        if let Some(d) = bound(&facts.lower) {
            lower.insert(*id, d);
        }
        if let Some(d) = bound(&facts.upper) {
            upper.insert(*id, d);
        }
    }
    DataFileBuilder::default()
        .content(DataContentType::Data)
        .file_path(file.location.clone())
        .file_format(DataFileFormat::Parquet)
        .record_count(file.records)
        .file_size_in_bytes(file.bytes)
        .partition_spec_id(file.spec_id)
        .partition(partition)
        .column_sizes(column_sizes)
        .value_counts(value_counts)
        .null_value_counts(null_counts)
        .lower_bounds(lower)
        .upper_bounds(upper)
        .build()
        .map_err(|e| describing(e.to_string()))
}

/// `uri` without the password of its user part (`postgresql://u:PW@h/db` →
/// `postgresql://u@h/db`): descriptions reach `explain`, logs and the web page.
fn without_password(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return uri.to_string();
    };
    let (authority, path) = rest
        .split_once('/')
        .map_or((rest, None), |(a, p)| (a, Some(p)));
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => {
            let user = user.split_once(':').map_or(user, |(name, _)| name);
            format!("{user}@{host}")
        }
        None => authority.to_string(),
    };
    match path {
        Some(path) => format!("{scheme}://{authority}/{path}"),
        None => format!("{scheme}://{authority}"),
    }
}

/// A catalog's URI spelled one way: without credentials, a SQLite file by its absolute
/// path.
fn catalog_place(uri: &str) -> String {
    if let Some(path) = uri.strip_prefix("sqlite://") {
        let path = std::path::Path::new(path.split('?').next().unwrap_or(path));
        return match OutputPlace::directory(path) {
            OutputPlace::Directory(file) => format!("sqlite://{}", file.display()),
            other => other.to_string(),
        };
    }
    let (scheme, rest) = uri.split_once("://").unwrap_or(("", uri));
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!(
        "{}://{}/{}",
        scheme.to_ascii_lowercase(),
        host.to_ascii_lowercase(),
        path.trim_end_matches('/')
    )
}

/// The table's data directory, resolved and as its locations spell it.
fn data_dir(table: &Table) -> Result<(Location, String)> {
    let location = format!("{}/data", table.metadata().location().trim_end_matches('/'));
    Ok((locate(&location)?, location))
}

impl SinkFactory for IcebergSinkFactory {
    fn describe(&self) -> String {
        let c = &self.committer;
        format!(
            "iceberg({}, {})",
            c.ident,
            without_password(&c.config.catalog.uri)
        )
    }

    fn output_places(&self) -> Vec<OutputPlace> {
        let c = &self.committer;
        vec![OutputPlace::Named {
            system: format!(
                "iceberg catalog `{}` at {}",
                c.config.catalog.name,
                catalog_place(&c.config.catalog.uri)
            ),
            name: c.ident.to_string(),
        }]
    }

    fn epochs_per_commit(&self) -> u64 {
        self.committer.config.epochs_per_commit.max(1)
    }

    fn create(&self, schema: &StreamSchema, ctx: &SinkContext) -> Result<Box<dyn Sink>> {
        let table = self.committer.table()?;
        let output = Schema::new(schema.user_fields().cloned().collect::<Vec<_>>());
        let columns = match_table(&output, table.metadata().current_schema()).map_err(|e| {
            Error::config(
                format!("Iceberg table {}", self.committer.ident),
                e.to_string(),
            )
        })?;
        let metadata = table.metadata();
        let (spec, schema) = (metadata.default_partition_spec(), metadata.current_schema());
        let in_table = |e: crate::partition::PartitionError| {
            Error::config(
                format!("Iceberg table {}", self.committer.ident),
                e.to_string(),
            )
        };
        check_declared(&self.committer.config.partition_by, spec, schema).map_err(in_table)?;
        let partitioner = Partitioner::new(spec, schema, &columns).map_err(in_table)?;
        let (dir, location) = data_dir(&table)?;
        let target = DataFileTarget {
            dir,
            location,
            columns,
            target_file_bytes: self.committer.config.target_file_bytes,
            partitioner: partitioner.map(Arc::new),
            codec: self.committer.config.codec,
        };
        Ok(Box::new(IcebergSink {
            writer: DataFileWriter::new(target, ctx.subtask, ctx.generation),
            committer: (!ctx.exactly_once).then(|| self.committer.clone()),
            rows: 0,
            files: Vec::new(),
        }))
    }

    fn output_owner(&self) -> Result<Option<OutputOwner>> {
        match self.committer.existing_table()? {
            Some(table) => catalog::recorded_owner(&table),
            None => Ok(None),
        }
    }

    fn claim_output(&self, owner: &OutputOwner, replace: bool) -> Result<Option<OutputOwner>> {
        self.committer.table()?;
        let owner = owner.clone();
        self.committer
            .with_catalog(move |catalog, ident| async move {
                catalog::claim(catalog.as_ref(), &ident, &owner, replace)
                    .await
                    .map(Some)
            })
    }

    fn committer(&self) -> Option<&dyn SinkCommitter> {
        Some(self)
    }
}

impl SinkCommitter for IcebergSinkFactory {
    fn commit(&self, committable: &Committable) -> Result<()> {
        self.committer.append(&[committable])
    }

    fn commit_all(&self, committables: &[&Committable]) -> Result<()> {
        self.committer.append(committables)
    }

    // A table that is gone (its catalog entry deleted) holds nothing, and is not made
    // anew here: recovery asks before it decides anything.
    fn staged_output(&self, committable: &Committable) -> Result<StagedOutput> {
        let c = &self.committer;
        let Some(table) = c.existing_table()? else {
            return Ok(StagedOutput::Lost);
        };
        if catalog::committed_epochs(&table, &c.config.sink_id).contains(&committable.epoch.0) {
            return Ok(StagedOutput::Published);
        }
        let staged = StagedFiles::of(committable)?;
        let files = staged
            .files
            .iter()
            .map(|f| locate(&f.location))
            .collect::<Result<Vec<_>>>()?;
        let all_there = block_on(async move {
            for file in &files {
                if !storage::exists(file).await? {
                    return Ok(false);
                }
            }
            Ok::<_, Error>(true)
        })??;
        Ok(if all_there {
            StagedOutput::Staged
        } else {
            StagedOutput::Lost
        })
    }

    // One read of the table's snapshot ancestry answers for every epoch; a table that
    // is gone holds none.
    fn holds_published(&self, committables: &[&Committable]) -> Result<Vec<bool>> {
        let c = &self.committer;
        let committed = match c.existing_table()? {
            Some(table) => catalog::committed_epochs(&table, &c.config.sink_id),
            None => Default::default(),
        };
        Ok(committables
            .iter()
            .map(|k| committed.contains(&k.epoch.0))
            .collect())
    }

    fn unpublish(&self, after: Epoch) -> Result<Unpublished> {
        Ok(Unpublished::Cannot(format!(
            "the Iceberg sink cannot take back the snapshots it appended to {} after epoch {after}; roll the table back to the snapshot before them with the catalog's tools (e.g. Spark's rollback_to_snapshot), or drop the table",
            self.committer.ident
        )))
    }

    fn published(&self) -> Result<usize> {
        let c = &self.committer;
        Ok(match c.existing_table()? {
            Some(table) => catalog::committed_epochs(&table, &c.config.sink_id).len(),
            None => 0,
        })
    }

    // Data files of runs before `generation` that no snapshot lists were written for
    // epochs that never committed.
    fn abort_staged(&self, generation: u64) -> Result<usize> {
        let Some(table) = self.committer.existing_table()? else {
            return Ok(0);
        };
        let (dir, location) = data_dir(&table)?;
        block_on(async move {
            let files = storage::list_files(&dir).await?;
            let referenced = catalog::referenced_files(&table).await?;
            let mut removed = 0;
            for relative in files {
                let older = data_file_generation(&relative).is_some_and(|g| g < generation);
                let file = format!("{location}/{relative}");
                if older && !referenced.contains(&file) {
                    storage::delete(&locate(&file)?).await?;
                    removed += 1;
                }
            }
            Ok(removed)
        })?
    }
}

/// One subtask of the Iceberg sink.
struct IcebergSink {
    writer: DataFileWriter,
    /// Without checkpoints: the committer that appends everything at end of input.
    committer: Option<Arc<Committer>>,
    rows: u64,
    files: Vec<PathBuf>,
}

impl Sink for IcebergSink {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let batch = without_timestamp(batch)?;
        self.rows += batch.num_rows() as u64;
        self.writer.write(&batch)
    }

    fn pre_commit(&mut self, _epoch: Epoch) -> Result<Option<String>> {
        let files = self.writer.take_finished()?;
        if files.is_empty() {
            return Ok(None);
        }
        self.note_files(&files);
        serde_json::to_string(&StagedFiles { files })
            .map(Some)
            .map_err(|e| Error::external("sink committable", e))
    }

    // With checkpoints, rows after the last barrier stay unpublished (the next run
    // replays them); without, everything is appended now, at least once.
    fn finish(&mut self) -> Result<SinkSummary> {
        if let Some(committer) = &self.committer {
            let files = self.writer.take_finished()?;
            if !files.is_empty() {
                committer.append_files(committer.table()?, &files, BTreeSet::new())?;
                self.note_files(&files);
            }
        }
        Ok(SinkSummary {
            rows: self.rows,
            files: self.files.clone(),
        })
    }
}

impl IcebergSink {
    // Local files by path; objects by their URL.
    fn note_files(&mut self, files: &[WrittenFile]) {
        self.files.extend(
            files
                .iter()
                .map(|f| local_path(&f.location).unwrap_or_else(|| PathBuf::from(&f.location))),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catalog_password_is_never_described() {
        assert_eq!(
            without_password("postgresql://riffle:PW@db:5432/cat"),
            "postgresql://riffle@db:5432/cat"
        );
        assert_eq!(
            without_password("sqlite:///var/lib/c.db"),
            "sqlite:///var/lib/c.db"
        );
        assert_eq!(without_password("http://h:8181"), "http://h:8181");
    }

    #[test]
    fn spellings_of_one_catalog_are_one_place() {
        assert_eq!(
            catalog_place("postgresql://a:PW@HOST:5432/cat/"),
            catalog_place("postgresql://host:5432/cat")
        );
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            catalog_place("sqlite://./c.db"),
            catalog_place(&format!("sqlite://{}/c.db", cwd.display()))
        );
        assert!(!catalog_place("postgresql://a:PW@h/cat").contains("PW"));
    }
}
