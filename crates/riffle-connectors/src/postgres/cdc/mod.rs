//! `postgres-cdc`: a PostgreSQL table read through logical replication, as an upsert
//! stream keyed by its primary key (docs/connectors.md, "PostgreSQL CDC").
//!
//! A new job creates a replication slot, reads the table as of the slot's consistent
//! point (its exported snapshot), then streams the slot's changes (pgoutput). Rows are
//! `+U` (the key's new row) and `-D` (the key deleted); the planner turns them into a
//! changelog by the key, as for `upsert-kafka`. The checkpoint holds the position
//! (`position.rs`); the slot confirms an LSN only once a checkpoint holding it has
//! committed, so PostgreSQL keeps every change a restart may need and releases the WAL
//! after. Subtask 0 reads; the others end at once.

mod catalog;
mod position;
mod reader;
mod rows;
mod state;

pub use position::{lsn_text, CdcPosition, Phase};

use super::Secret;
use position::StreamCursor;
use reader::{Event, Reader, Start, Value};
use riffle_core::arrow::datatypes::{Field, SchemaRef};
use riffle_core::{
    Epoch, Error, OperatorContext, OperatorState, Result, RowKind, Source, SourceFactory,
    SourcePoll, StreamSchema,
};
use rows::{time_text, Change, ChangeBatches, ColumnMap};
use state::{decode, encode, Origin};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc::error::TryRecvError;

/// Where a job without a checkpoint starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CdcStartup {
    /// The table's rows, then its changes (Flink CDC's `initial`).
    Initial,
    /// Only changes made after the slot is created.
    LatestOffset,
}

/// What a `postgres-cdc` table reads.
#[derive(Debug, Clone)]
pub struct PostgresCdcConfig {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: Option<Secret>,
    pub database: String,
    pub schema: String,
    pub table: String,
    /// The replication slot (created by the job's first run).
    pub slot: String,
    /// The publication the slot streams (created for the table when missing).
    pub publication: String,
    /// The declared columns (without `_timestamp`).
    pub columns: SchemaRef,
    /// The declared PRIMARY KEY.
    pub key: Vec<String>,
    /// The declared column holding event time.
    pub event_column: String,
    pub startup: CdcStartup,
    /// At most this many changes per second (catching up without flooding what lies
    /// downstream); none: as fast as they come.
    pub max_records_per_second: Option<u64>,
    /// Rows per batch at most.
    pub batch_rows: usize,
}

impl PostgresCdcConfig {
    /// The table as SQL names it: `"schema"."table"`.
    pub fn qualified(&self) -> String {
        format!(
            "{}.{}",
            super::types::quote_ident(&self.schema),
            super::types::quote_ident(&self.table)
        )
    }

    fn what(&self) -> String {
        format!(
            "postgres-cdc {}:{}/{} {}.{}",
            self.host, self.port, self.database, self.schema, self.table
        )
    }

    /// A refusal: the job cannot go on safely as configured (not worth a restart).
    fn refusal(&self, message: impl Into<String>) -> Error {
        Error::config(self.what(), message.into())
    }

    /// A failure talking to the server (a restart may get past it), with its causes
    /// (a client error alone says only "db error").
    fn failure(&self, doing: &str, e: impl std::error::Error) -> Error {
        let causes = super::connection::error_chain(&e);
        Error::external(self.what(), format!("{doing}: {causes}"))
    }
}

/// Builds the source's subtasks.
pub struct PostgresCdcFactory {
    config: Arc<PostgresCdcConfig>,
    output: StreamSchema,
    event_column: usize,
    key_columns: Vec<usize>,
}

impl PostgresCdcFactory {
    /// Checks `config`.
    ///
    /// # Errors
    /// No columns, a key or event-time column that is not declared, a slot name
    /// PostgreSQL would refuse.
    pub fn new(config: PostgresCdcConfig) -> Result<Self> {
        let valid_slot = !config.slot.is_empty()
            && config.slot.len() <= 63
            && config
                .slot
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid_slot {
            return Err(Error::config(
                "slot.name",
                format!(
                    "`{}` is not a replication slot name: lower-case letters, digits and `_`, at most 63",
                    config.slot
                ),
            ));
        }
        let index = |name: &str, what: &str| {
            config
                .columns
                .index_of(name)
                .map_err(|_| Error::config(what, format!("`{name}` is not a declared column")))
        };
        let event_column = index(&config.event_column, "event time")?;
        let key_columns = config
            .key
            .iter()
            .map(|k| index(k, "PRIMARY KEY"))
            .collect::<Result<Vec<_>>>()?;
        let mut fields: Vec<Field> = config
            .columns
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        fields.push(riffle_core::row_kind_field());
        Ok(Self {
            output: StreamSchema::with_timestamp(fields),
            config: Arc::new(config),
            event_column,
            key_columns,
        })
    }
}

impl SourceFactory for PostgresCdcFactory {
    fn describe(&self) -> String {
        format!(
            "postgres-cdc({}, slot {})",
            self.config.qualified(),
            self.config.slot
        )
    }

    fn output_schema(&self) -> &StreamSchema {
        &self.output
    }

    fn can_rescale(&self) -> bool {
        // One position, read by subtask 0 at any parallelism.
        true
    }

    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Source>> {
        Ok(Box::new(PostgresCdcSource {
            config: self.config.clone(),
            table: self.config.qualified(),
            batches: ChangeBatches::new(
                self.output.clone(),
                self.config.columns.clone(),
                self.event_column,
            ),
            event_column: self.event_column,
            key_columns: self.key_columns.clone(),
            reads: ctx.subtask == 0,
            restored: None,
            reader: None,
            stage: Stage::Waiting,
            relation: None,
            commit_micros: 0,
            checkpoints: VecDeque::new(),
            throttle: None,
        }))
    }
}

/// Where the source is.
enum Stage {
    /// Before the reader says where the slot stands.
    Waiting,
    /// Reading the snapshot; the stream then starts at this position.
    Snapshot(CdcPosition),
    /// Reading the stream.
    Stream(StreamCursor),
}

struct PostgresCdcSource {
    config: Arc<PostgresCdcConfig>,
    /// The table as SQL names it, for messages (made once, not per change).
    table: String,
    batches: ChangeBatches,
    event_column: usize,
    key_columns: Vec<usize>,
    /// Only subtask 0 reads.
    reads: bool,
    restored: Option<CdcPosition>,
    reader: Option<Reader>,
    stage: Stage,
    /// The table's relation id in this stream, and its columns' places.
    relation: Option<(u32, ColumnMap)>,
    /// The commit time of the open transaction (PostgreSQL's microseconds since 2000).
    commit_micros: i64,
    /// Positions of checkpoints not yet known to be committed.
    checkpoints: VecDeque<(Epoch, CdcPosition)>,
    /// When throttling began, and changes read since.
    throttle: Option<(Instant, u64)>,
}

impl PostgresCdcSource {
    fn position(&self) -> Option<CdcPosition> {
        match &self.stage {
            Stage::Waiting => self.restored,
            Stage::Snapshot(position) => Some(*position),
            Stage::Stream(cursor) => Some(cursor.position()),
        }
    }

    /// How many changes the throttle lets through now.
    fn allowance(&mut self) -> usize {
        let Some(rate) = self.config.max_records_per_second else {
            return self.config.batch_rows;
        };
        let (started, read) = *self.throttle.get_or_insert((Instant::now(), 0));
        let allowed = (started.elapsed().as_secs_f64() * rate as f64) as u64;
        (allowed.saturating_sub(read) as usize).min(self.config.batch_rows)
    }

    /// Applies one event; appends the changes it makes to `out`.
    fn apply(&mut self, event: Event, out: &mut Vec<Change>) -> Result<()> {
        match event {
            Event::SlotCreated { consistent } => {
                self.stage = Stage::Snapshot(CdcPosition::fresh(consistent));
            }
            Event::SnapshotRows(rows) => {
                out.extend(rows.into_iter().map(|values| Change {
                    kind: RowKind::UpdateAfter,
                    values,
                }));
            }
            Event::SnapshotEnd => {
                let Stage::Snapshot(position) = self.stage else {
                    return Err(self.unexpected("the snapshot's end outside a snapshot"));
                };
                self.stage = Stage::Stream(StreamCursor::resuming(position));
            }
            Event::Begin { commit_micros } => {
                self.commit_micros = commit_micros;
                self.cursor()?.begin();
            }
            Event::Relation {
                id,
                namespace,
                name,
                columns,
                full,
            } => {
                if namespace == self.config.schema && name == self.config.table {
                    let map = ColumnMap::new(
                        &self.table,
                        &self.config.columns,
                        &self.config.key,
                        &columns,
                        full,
                    )?;
                    self.relation = Some((id, map));
                }
            }
            Event::Insert { relation, new } => {
                if self.ours(relation) && self.cursor()?.change() {
                    let row = self.pick(&filled(&new, None, &self.table)?);
                    out.push(Change {
                        kind: RowKind::UpdateAfter,
                        values: row,
                    });
                }
            }
            Event::Update { relation, old, new } => {
                if self.ours(relation) && self.cursor()?.change() {
                    let whole_old = old
                        .as_ref()
                        .filter(|(_, full)| *full)
                        .map(|(o, _)| o.as_slice());
                    let new = self.pick(&filled(&new, whole_old, &self.table)?);
                    if let Some((old, _)) = old {
                        let old = self.pick(&filled(&old, None, &self.table)?);
                        let moved = self.key_columns.iter().any(|&k| old[k] != new[k]);
                        if moved {
                            out.push(self.deletion(old));
                        }
                    }
                    out.push(Change {
                        kind: RowKind::UpdateAfter,
                        values: new,
                    });
                }
            }
            Event::Delete { relation, old } => {
                if self.ours(relation) && self.cursor()?.change() {
                    let old = self.pick(&filled(&old, None, &self.table)?);
                    out.push(self.deletion(old));
                }
            }
            Event::Truncate { relations } => {
                if relations.iter().any(|r| self.ours(*r)) {
                    return Err(self.config.refusal(format!(
                        "{} was truncated: the change stream does not say which rows that removed, so riffle cannot withdraw them; delete rows with DELETE, or start the job afresh (a new 'slot.name') after a TRUNCATE",
                        self.config.qualified()
                    )));
                }
            }
            Event::Commit { end_lsn } => {
                let cursor = self.cursor()?;
                cursor.commit(end_lsn);
                if cursor.skipped_past_end() {
                    return Err(self.config.refusal(format!(
                        "the transaction ending at {} has fewer changes than the checkpoint says were read of it: the slot does not stream what it streamed before",
                        lsn_text(end_lsn)
                    )));
                }
            }
            Event::KeepAlive { wal_end } => {
                if let Stage::Stream(cursor) = &mut self.stage {
                    cursor.idle_until(wal_end);
                }
            }
        }
        Ok(())
    }

    fn cursor(&mut self) -> Result<&mut StreamCursor> {
        match &mut self.stage {
            Stage::Stream(cursor) => Ok(cursor),
            // `self.table`, not `self.unexpected`: a field apart from `self.stage`.
            _ => Err(Error::external(
                self.table.clone(),
                "postgres-cdc: a change before the stream started",
            )),
        }
    }

    fn unexpected(&self, what: &str) -> Error {
        Error::external(self.table.clone(), format!("postgres-cdc: {what}"))
    }

    fn ours(&self, relation: u32) -> bool {
        self.relation
            .as_ref()
            .is_some_and(|(id, _)| *id == relation)
    }

    fn pick(&self, tuple: &[Option<String>]) -> Vec<Option<String>> {
        match &self.relation {
            Some((_, map)) => map.pick(tuple),
            None => Vec::new(),
        }
    }

    /// A `-D` of the key in `row` (its other columns NULL), timed by its event column
    /// or, when a delete does not carry it, by the commit.
    fn deletion(&self, row: Vec<Option<String>>) -> Change {
        let mut values: Vec<Option<String>> = vec![None; row.len()];
        for &k in &self.key_columns {
            values[k] = row[k].clone();
        }
        values[self.event_column] = row[self.event_column].clone().or_else(|| {
            let data_type = self.config.columns.field(self.event_column).data_type();
            Some(time_text(
                pgwire_replication::protocol::pg_to_unix_timestamp(self.commit_micros),
                data_type,
            ))
        });
        Change {
            kind: RowKind::Delete,
            values,
        }
    }
}

/// A tuple's values as text, its unchanged TOASTed values taken from the old tuple
/// (given only when it carries every column: a key-only old tuple's other columns are
/// NULL whatever their values).
///
/// # Errors
/// An unchanged value the old tuple does not carry.
fn filled(tuple: &[Value], old: Option<&[Value]>, table: &str) -> Result<Vec<Option<String>>> {
    tuple
        .iter()
        .enumerate()
        .map(|(i, value)| match value {
            Value::Null => Ok(None),
            Value::Text(text) => Ok(Some(text.clone())),
            Value::Unchanged => match old.and_then(|o| o.get(i)) {
                Some(Value::Text(text)) => Ok(Some(text.clone())),
                Some(Value::Null) => Ok(None),
                _ => Err(Error::config(
                    "postgres-cdc",
                    format!(
                        "an update of {table} left a large (TOASTed) value out as unchanged, and the change does not carry the old one: run ALTER TABLE {table} REPLICA IDENTITY FULL"
                    ),
                )),
            },
        })
        .collect()
}

impl Source for PostgresCdcSource {
    fn poll_next(&mut self) -> Result<SourcePoll> {
        if !self.reads {
            return Ok(SourcePoll::End);
        }
        if self.reader.is_none() {
            let start = match self.restored {
                Some(position) => {
                    self.stage = match position.phase {
                        Phase::Snapshot => Stage::Snapshot(position),
                        Phase::Stream => Stage::Stream(StreamCursor::resuming(position)),
                    };
                    Start::Resume(position)
                }
                None => Start::Fresh,
            };
            self.reader = Some(Reader::start(self.config.clone(), start)?);
        }
        let allowance = self.allowance();
        let mut changes = Vec::new();
        while changes.len() < allowance {
            let Some(reader) = self.reader.as_mut() else {
                break;
            };
            let event = match reader.events.try_recv() {
                Ok(event) => event?,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    return Err(self.unexpected("the reader stopped"));
                }
            };
            self.apply(event, &mut changes)?;
        }
        if changes.is_empty() {
            return Ok(SourcePoll::Pending);
        }
        if let Some((_, read)) = &mut self.throttle {
            *read += changes.len() as u64;
        }
        Ok(SourcePoll::Batch(self.batches.batch(&changes)?))
    }

    fn snapshot(&mut self, epoch: Epoch) -> Result<OperatorState> {
        let Some(position) = self.position().filter(|_| self.reads) else {
            return Ok(OperatorState::default());
        };
        self.checkpoints.push_back((epoch, position));
        while self.checkpoints.len() > 64 {
            self.checkpoints.pop_front();
        }
        Ok(OperatorState::of(vec![encode(
            &Origin::of(&self.config),
            position,
        )?]))
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        self.restored = decode(&state, &Origin::of(&self.config))?;
        Ok(())
    }

    fn on_checkpoint_complete(&mut self, epoch: Epoch) -> Result<()> {
        let mut newest = None;
        while self.checkpoints.front().is_some_and(|(e, _)| *e <= epoch) {
            newest = self.checkpoints.pop_front();
        }
        if let (Some((_, position)), Some(reader)) = (newest, &self.reader) {
            if position.phase == Phase::Stream {
                reader
                    .confirm
                    .fetch_max(position.confirmable(), Ordering::AcqRel);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_large_value_comes_from_the_old_row_or_is_refused() {
        let new = [Value::Text("1".into()), Value::Unchanged];
        let old = [Value::Text("1".into()), Value::Text("big".into())];
        assert_eq!(
            filled(&new, Some(&old), "t").unwrap(),
            vec![Some("1".into()), Some("big".into())]
        );
        let refused = filled(&new, None, "t").unwrap_err().to_string();
        assert!(refused.contains("REPLICA IDENTITY FULL"), "{refused}");
    }
}
