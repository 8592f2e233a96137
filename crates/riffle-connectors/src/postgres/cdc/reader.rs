//! The I/O of a PostgreSQL CDC source, on the connectors' runtime: the slot, the
//! initial snapshot, the replication stream, and the slot's confirmed LSN. It decides
//! nothing about positions (`position.rs` does, on the source's thread); it delivers
//! what PostgreSQL sends, in order, through a bounded channel.

use super::catalog::{check_table, ensure_publication, server_end, slot_state};
use super::position::{lsn_text, parse_lsn, CdcPosition, Phase};
use super::rows::PgColumn;
use super::{CdcStartup, PostgresCdcConfig};
use crate::postgres::types::quote_ident;
use pg_walstream::{LogicalReplicationMessage, LogicalReplicationParser, TupleData};
use pgwire_replication::{Lsn, ReplicationClient, ReplicationConfig, ReplicationEvent};
use riffle_core::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

/// Session settings that make every value's text form the one `rows.rs` casts from.
/// `row_security=off`: a policy that would hide rows from the snapshot fails it instead.
const SESSION: &str = "-c TimeZone=UTC -c DateStyle=ISO -c IntervalStyle=iso_8601 -c extra_float_digits=3 -c bytea_output=hex -c row_security=off";

/// Rows fetched from the snapshot's cursor at a time.
const SNAPSHOT_FETCH: usize = 4096;

/// One value of a tuple as pgoutput sends it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Text(String),
    /// A TOASTed value the update did not change, which pgoutput leaves out.
    Unchanged,
}

/// What the reader delivers, in PostgreSQL's order.
#[derive(Debug)]
pub enum Event {
    /// A new slot: its snapshot follows (unless the startup mode skips it), then the
    /// stream from `consistent`.
    SlotCreated {
        consistent: u64,
    },
    /// Rows of the snapshot, in declared-column order.
    SnapshotRows(Vec<Vec<Option<String>>>),
    SnapshotEnd,
    Begin {
        commit_micros: i64,
    },
    Relation {
        id: u32,
        namespace: String,
        name: String,
        columns: Vec<PgColumn>,
        /// REPLICA IDENTITY FULL: a delete carries every column.
        full: bool,
    },
    Insert {
        relation: u32,
        new: Vec<Value>,
    },
    Update {
        relation: u32,
        /// The old row: every column (`full`), or the key's columns only (the others
        /// NULL, which says nothing of their values).
        old: Option<(Vec<Value>, bool)>,
        new: Vec<Value>,
    },
    Delete {
        relation: u32,
        old: Vec<Value>,
    },
    Truncate {
        relations: Vec<u32>,
    },
    Commit {
        end_lsn: u64,
    },
    /// Everything up to `wal_end` has been sent.
    KeepAlive {
        wal_end: u64,
    },
}

/// Where the reader starts.
#[derive(Debug, Clone, Copy)]
pub enum Start {
    /// No checkpoint: create the slot (its snapshot is the table's first rows).
    Fresh,
    /// From a checkpointed position on the existing slot.
    Resume(CdcPosition),
}

/// A running reader; dropping it stops it.
pub struct Reader {
    pub events: mpsc::Receiver<Result<Event>>,
    /// The LSN the slot may confirm (raised after checkpoints commit).
    pub confirm: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Reader {
    /// Starts reading `config`'s table from `start`.
    ///
    /// # Errors
    /// The connectors' runtime cannot start.
    pub fn start(config: Arc<PostgresCdcConfig>, start: Start) -> Result<Self> {
        let (tx, events) = mpsc::channel(8192);
        let confirm = Arc::new(AtomicU64::new(0));
        let confirmed = confirm.clone();
        let task = crate::io_runtime::spawn(async move {
            if let Err(e) = run(&config, start, &tx, &confirmed).await {
                let _ = tx.send(Err(e)).await;
            }
        })?;
        Ok(Self {
            events,
            confirm,
            task,
        })
    }
}

type Sender = mpsc::Sender<Result<Event>>;

async fn deliver(tx: &Sender, event: Event) -> Result<()> {
    // The source is gone (the job stopped): so is the reader.
    tx.send(Ok(event))
        .await
        .map_err(|_| Error::external("postgres-cdc", "the source stopped"))
}

async fn run(
    config: &PostgresCdcConfig,
    start: Start,
    tx: &Sender,
    confirm: &AtomicU64,
) -> Result<()> {
    let sql = connect(config).await?;
    check_table(&sql, config).await?;
    let slot = slot_state(&sql, config).await?;
    let first = matches!(start, Start::Fresh) && slot.is_none();
    ensure_publication(&sql, config, first).await?;
    let (mut replication, from) = match (start, slot) {
        (Start::Fresh, None) => {
            let mut client = ReplicationClient::connect_gated(replication_config(config, 0))
                .await
                .map_err(|e| config.failure("cannot open a replication connection", e))?;
            let snapshot = match config.startup {
                CdcStartup::Initial => "export",
                CdcStartup::LatestOffset => "nothing",
            };
            let rows = client
                .simple_query(&format!(
                    "CREATE_REPLICATION_SLOT {} LOGICAL pgoutput (SNAPSHOT '{snapshot}')",
                    config.slot
                ))
                .await
                .map_err(|e| config.failure("cannot create the replication slot", e))?;
            let text = |i: usize| -> Option<String> {
                rows.first()?
                    .get(i)?
                    .as_ref()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
            };
            let consistent = text(1).as_deref().and_then(parse_lsn).ok_or_else(|| {
                Error::external(
                    "postgres-cdc",
                    "CREATE_REPLICATION_SLOT gave no consistent point",
                )
            })?;
            deliver(tx, Event::SlotCreated { consistent }).await?;
            if config.startup == CdcStartup::Initial {
                read_snapshot(&sql, config, text(2).as_deref(), tx).await?;
            }
            deliver(tx, Event::SnapshotEnd).await?;
            client
                .start()
                .await
                .map_err(|e| config.failure("cannot start replication", e))?;
            (client, None)
        }
        (Start::Fresh, Some(confirmed)) => {
            // A slot without a checkpoint that read from it: this job's own first run
            // died before its first checkpoint, or an operator made it. Read the table
            // as it is now and replay the slot's changes from its position over it.
            tracing::warn!(
                "postgres-cdc: the replication slot `{}` exists, but no checkpoint read from it; reading {} anew and replaying the slot's changes from {}",
                config.slot,
                config.qualified(),
                lsn_text(confirmed)
            );
            deliver(
                tx,
                Event::SlotCreated {
                    consistent: confirmed,
                },
            )
            .await?;
            if config.startup == CdcStartup::Initial {
                read_snapshot(&sql, config, None, tx).await?;
            }
            deliver(tx, Event::SnapshotEnd).await?;
            (open_stream(config, confirmed).await?, Some(confirmed))
        }
        (Start::Resume(position), None) => {
            return Err(config.refusal(format!(
                "the replication slot `{}` is gone, so the changes since this checkpoint ({}) cannot be read; start afresh (a new 'slot.name', or without the checkpoint)",
                config.slot,
                lsn_text(position.lsn)
            )));
        }
        (Start::Resume(position), Some(confirmed)) => {
            position
                .check_resume(confirmed)
                .map_err(|e| config.refusal(e.to_string()))?;
            position
                .check_server(server_end(&sql, config).await?)
                .map_err(|e| config.refusal(e.to_string()))?;
            if position.phase == Phase::Snapshot {
                // The exported snapshot died with the process that read it: read the
                // table as it is now. The stream from the slot's consistent point then
                // replays what changed since, which an upsert stream absorbs.
                read_snapshot(&sql, config, None, tx).await?;
                deliver(tx, Event::SnapshotEnd).await?;
            }
            (open_stream(config, position.lsn).await?, Some(position.lsn))
        }
    };
    replication
        .wait_started()
        .await
        .map_err(|e| config.failure("the server refused to stream the slot", e))?;
    if let Some(from) = from {
        // The slot is this session's now: had anyone confirmed past `from` before it
        // was taken, the server would have started there, past changes this job needs.
        let confirmed = slot_state(&sql, config).await?.unwrap_or(0);
        CdcPosition {
            phase: Phase::Stream,
            lsn: from,
            skip: 0,
        }
        .check_resume(confirmed)
        .map_err(|e| config.refusal(e.to_string()))?;
    }
    drop(sql);
    stream(config, &mut replication, tx, confirm).await
}

/// A replication session streaming the slot from `from`, which the slot confirms until
/// the source raises it.
async fn open_stream(config: &PostgresCdcConfig, from: u64) -> Result<ReplicationClient> {
    let config_from = replication_config(config, from).with_ack_lsn(Lsn::from_u64(from));
    ReplicationClient::connect(config_from)
        .await
        .map_err(|e| config.failure("cannot open a replication connection", e))
}

/// Delivers the replication stream until it fails; confirms LSNs as they are raised.
async fn stream(
    config: &PostgresCdcConfig,
    client: &mut ReplicationClient,
    tx: &Sender,
    confirm: &AtomicU64,
) -> Result<()> {
    let mut parser = LogicalReplicationParser::with_protocol_version(1);
    let mut confirmed = 0;
    loop {
        let wanted = confirm.load(Ordering::Acquire);
        if wanted > confirmed {
            client.update_applied_lsn(Lsn::from_u64(wanted));
            confirmed = wanted;
        }
        let received = match tokio::time::timeout(Duration::from_millis(100), client.recv()).await {
            Err(_) => continue,
            Ok(received) => {
                received.map_err(|e| config.failure("the replication stream failed", e))?
            }
        };
        let Some(event) = received else {
            return Err(Error::external(
                "postgres-cdc",
                "the replication stream ended",
            ));
        };
        let event = match event {
            ReplicationEvent::Begin {
                commit_time_micros, ..
            } => Event::Begin {
                commit_micros: commit_time_micros,
            },
            ReplicationEvent::Commit { end_lsn, .. } => Event::Commit {
                end_lsn: end_lsn.as_u64(),
            },
            ReplicationEvent::KeepAlive { wal_end, .. } => Event::KeepAlive {
                wal_end: wal_end.as_u64(),
            },
            ReplicationEvent::XLogData { data, .. } => {
                let parsed = parser.parse_wal_message(&data).map_err(|e| {
                    Error::external("postgres-cdc", format!("a pgoutput message: {e}"))
                })?;
                match change(parsed.message)? {
                    Some(event) => event,
                    None => continue,
                }
            }
            ReplicationEvent::Message { .. } => continue,
            ReplicationEvent::StoppedAt { .. } => {
                return Err(Error::external(
                    "postgres-cdc",
                    "the replication stream stopped",
                ))
            }
        };
        deliver(tx, event).await?;
    }
}

/// A pgoutput message as an event; `None` for what a table's changes do not need.
///
/// # Errors
/// A value that is not UTF-8 text.
fn change(message: LogicalReplicationMessage) -> Result<Option<Event>> {
    Ok(Some(match message {
        LogicalReplicationMessage::Relation {
            relation_id,
            namespace,
            relation_name,
            replica_identity,
            columns,
        } => Event::Relation {
            id: relation_id,
            namespace: namespace.to_string(),
            name: relation_name.to_string(),
            columns: columns
                .iter()
                .map(|c| PgColumn {
                    name: c.name.to_string(),
                    identity: c.is_key(),
                })
                .collect(),
            full: replica_identity == b'f',
        },
        LogicalReplicationMessage::Insert { relation_id, tuple } => Event::Insert {
            relation: relation_id,
            new: values(&tuple)?,
        },
        LogicalReplicationMessage::Update {
            relation_id,
            old_tuple,
            new_tuple,
            key_type,
        } => Event::Update {
            relation: relation_id,
            old: match old_tuple {
                Some(old) => Some((values(&old)?, key_type == Some('O'))),
                None => None,
            },
            new: values(&new_tuple)?,
        },
        LogicalReplicationMessage::Delete {
            relation_id,
            old_tuple,
            ..
        } => Event::Delete {
            relation: relation_id,
            old: values(&old_tuple)?,
        },
        LogicalReplicationMessage::Truncate { relation_ids, .. } => Event::Truncate {
            relations: relation_ids,
        },
        _ => return Ok(None),
    }))
}

fn values(tuple: &TupleData) -> Result<Vec<Value>> {
    tuple
        .columns
        .iter()
        .map(|c| {
            Ok(if c.is_null() {
                Value::Null
            } else if c.is_unchanged() {
                Value::Unchanged
            } else {
                // Never replaced by U+FFFD: a value that is not UTF-8 (a SQL_ASCII
                // database) fails the job instead of changing.
                let text = std::str::from_utf8(c.as_bytes()).map_err(|e| {
                    Error::external("postgres-cdc", format!("a value that is not UTF-8: {e}"))
                })?;
                Value::Text(text.to_string())
            })
        })
        .collect()
}

fn replication_config(config: &PostgresCdcConfig, start: u64) -> ReplicationConfig {
    ReplicationConfig::new(
        config.host.clone(),
        config.user.clone(),
        config
            .password
            .as_ref()
            .map(|p| p.reveal().to_string())
            .unwrap_or_default(),
        config.database.clone(),
        config.slot.clone(),
        config.publication.clone(),
    )
    .with_port(config.port)
    .with_start_lsn(Lsn::from_u64(start))
    .with_status_interval(Duration::from_secs(1))
    .with_options(SESSION)
    .with_application_name("riffle-cdc")
}

/// A plain connection for the snapshot and the catalog.
async fn connect(config: &PostgresCdcConfig) -> Result<Client> {
    let mut pg = tokio_postgres::Config::new();
    pg.host(&config.host)
        .port(config.port)
        .user(&config.user)
        .dbname(&config.database)
        .options(SESSION)
        .application_name("riffle-cdc");
    if let Some(password) = &config.password {
        pg.password(password.reveal());
    }
    let (client, connection) = pg
        .connect(NoTls)
        .await
        .map_err(|e| config.failure("cannot connect", e))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("PostgreSQL CDC connection ended: {e}");
        }
    });
    Ok(client)
}

/// Reads the table's rows (as of the exported `snapshot`, or of now) and delivers them.
async fn read_snapshot(
    sql: &Client,
    config: &PostgresCdcConfig,
    snapshot: Option<&str>,
    tx: &Sender,
) -> Result<()> {
    let failed = |e| config.failure("reading the snapshot", e);
    sql.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .await
        .map_err(failed)?;
    if let Some(name) = snapshot {
        let name = name.replace('\'', "");
        sql.batch_execute(&format!("SET TRANSACTION SNAPSHOT '{name}'"))
            .await
            .map_err(failed)?;
    }
    let columns: Vec<String> = config
        .columns
        .fields()
        .iter()
        .map(|f| quote_ident(f.name()))
        .collect();
    sql.batch_execute(&format!(
        "DECLARE riffle_snapshot NO SCROLL CURSOR FOR SELECT {} FROM ONLY {}",
        columns.join(", "),
        config.qualified()
    ))
    .await
    .map_err(failed)?;
    let width = columns.len();
    loop {
        let messages = sql
            .simple_query(&format!("FETCH {SNAPSHOT_FETCH} FROM riffle_snapshot"))
            .await
            .map_err(failed)?;
        let rows: Vec<Vec<Option<String>>> = messages
            .iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::Row(row) => {
                    Some((0..width).map(|i| row.get(i).map(str::to_string)).collect())
                }
                _ => None,
            })
            .collect();
        if rows.is_empty() {
            break;
        }
        deliver(tx, Event::SnapshotRows(rows)).await?;
    }
    sql.batch_execute("COMMIT").await.map_err(failed)
}
