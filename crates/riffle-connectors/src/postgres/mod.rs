//! The PostgreSQL sink: exactly-once through prepared transactions.
//!
//! Each subtask writes an epoch's rows inside one transaction (binary `COPY` when
//! appending, `INSERT … ON CONFLICT DO UPDATE` when upserting by key), adds a row to the
//! commit ledger in the same transaction, and at the barrier runs
//! `PREPARE TRANSACTION 'riffle/<pipeline>/<sink>/<epoch>/<subtask>'`. Once the epoch's
//! manifest is PREPARED the coordinator runs `COMMIT PREPARED`; a commit repeated by
//! recovery finds the transaction gone and the ledger row present, and changes nothing.
//! Recovery rolls back every prepared transaction of this sink that no manifest
//! commits (found in `pg_prepared_xacts` by the name prefix).

mod cdc;
mod connection;
mod ledger;
mod lookup;
mod read;
mod sink;
mod tls;
mod types;

pub use cdc::{CdcStartup, PostgresCdcConfig, PostgresCdcFactory};
pub use lookup::{PostgresLookupConfig, PostgresLookupFactory};
pub use types::PgType;

use crate::io_runtime::block_on;
use riffle_core::{
    Committable, Committer, Epoch, Error, OutputOwner, OutputPlace, Result, Sink, SinkContext,
    SinkFactory, StagedOutput, StreamSchema, Unpublished,
};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

/// How rows reach the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteMode {
    /// Every row is inserted (binary `COPY`).
    Append,
    /// Rows are upserted by these key columns; a later row for a key replaces it.
    Upsert {
        /// The table's primary key columns.
        key: Vec<String>,
    },
}

/// A password, never printed.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// Wraps a password.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub(crate) fn reveal(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
    }
}

/// Where and how a PostgreSQL sink writes.
#[derive(Debug, Clone)]
pub struct PostgresSinkConfig {
    /// `postgres://user@host:port/database` (no password: see `password`).
    pub url: String,
    /// The password, taken from an environment variable by the caller.
    pub password: Option<Secret>,
    /// Target table, optionally `schema.table`.
    pub table: String,
    /// Append or upsert.
    pub mode: WriteMode,
    /// Create the table from the output's columns when it does not exist.
    pub create_table: bool,
    /// Table recording which epochs each subtask committed.
    pub ledger_table: String,
    /// Names this sink's transactions: `<pipeline>/<sink>`; unique per sink and job.
    pub label: String,
}

impl PostgresSinkConfig {
    /// An append sink into `table` of the database at `url`.
    pub fn new(url: impl Into<String>, table: impl Into<String>, label: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            password: None,
            table: table.into(),
            mode: WriteMode::Append,
            create_table: false,
            ledger_table: "riffle_sink_ledger".into(),
            label: label.into(),
        }
    }

    /// The server as the user wrote it, without credentials, for messages.
    pub(crate) fn server(&self) -> String {
        let rest = self
            .url
            .split_once("://")
            .map_or(self.url.as_str(), |(_, r)| r);
        let rest = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
        rest.split('?').next().unwrap_or(rest).to_string()
    }

    /// The table as one place: the server with its default port, the table with its
    /// default schema (`t` is `public.t`).
    fn place(&self) -> OutputPlace {
        let server = self.server().to_ascii_lowercase();
        let (host, database) = server.split_once('/').unwrap_or((&server, ""));
        let has_port = host.rsplit_once(':').is_some_and(|(_, p)| !p.contains(']'));
        let host = if has_port {
            host.to_string()
        } else {
            format!("{host}:5432")
        };
        OutputPlace::Named {
            system: format!("postgres {host}/{database}"),
            name: ledger::target(self),
        }
    }

    /// An error of this sink's server, naming it and the table.
    fn error(&self, message: impl std::fmt::Display) -> Error {
        Error::external(
            format!("PostgreSQL at {} (table `{}`)", self.server(), self.table),
            message,
        )
    }

    /// An error of the server, with PostgreSQL's own message and SQLSTATE when it sent
    /// one (the client's display of such errors is only "db error").
    pub(crate) fn db_error(&self, e: tokio_postgres::Error) -> Error {
        match e.as_db_error() {
            Some(db) => self.error(format!(
                "{}: {} (SQLSTATE {})",
                db.severity(),
                db.message(),
                db.code().code()
            )),
            None if e.is_closed() => self.error(format!("the connection was closed: {e}")),
            None => self.error(e),
        }
    }

    /// Prefix of every prepared transaction's name.
    fn transaction_prefix(&self) -> String {
        format!("riffle/{}/", self.label)
    }

    /// The prepared transaction of `subtask` for `epoch`.
    fn transaction_id(&self, epoch: u64, subtask: usize) -> String {
        format!("{}{epoch}/{subtask}", self.transaction_prefix())
    }
}

/// Builds PostgreSQL sink subtasks and commits or rolls back their transactions.
pub struct PostgresSinkFactory {
    config: PostgresSinkConfig,
    /// Whether the table and ledger were prepared (once per process, not per subtask:
    /// concurrent `CREATE TABLE IF NOT EXISTS` can fail in PostgreSQL).
    prepared: Mutex<bool>,
    /// The connection commits and recovery use, opened on first need.
    admin: Mutex<Option<Arc<Client>>>,
}

impl PostgresSinkFactory {
    /// A factory for `config`.
    ///
    /// # Errors
    /// The URL carries a password, or the label is empty.
    pub fn new(config: PostgresSinkConfig) -> Result<Self> {
        let authority = config.url.split_once("://").map_or("", |(_, r)| r);
        let userinfo = authority.split('/').next().unwrap_or("").rsplit_once('@');
        if userinfo.is_some_and(|(user, _)| user.contains(':')) {
            return Err(Error::config(
                "url",
                "the URL holds a password; give the name of an environment variable that \
                 holds it instead ('password.env'), so it is never printed or stored",
            ));
        }
        if config.label.is_empty() {
            return Err(Error::config("label", "a sink needs a non-empty label"));
        }
        Ok(Self {
            config,
            prepared: Mutex::new(false),
            admin: Mutex::new(None),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &PostgresSinkConfig {
        &self.config
    }

    /// Runs `op` on the admin connection; when that connection turns out to be broken
    /// (a server restart, an administrator's `pg_terminate_backend`), once more on a new
    /// one.
    fn with_admin<T, F, Fut>(&self, op: F) -> Result<T>
    where
        F: Fn(Arc<Client>, PostgresSinkConfig) -> Fut,
        Fut: std::future::Future<Output = Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        let client = self.admin()?;
        match block_on(op(client.clone(), self.config.clone()))? {
            Err(_) if client.is_closed() => {
                let client = self.admin()?;
                block_on(op(client, self.config.clone()))?
            }
            result => result,
        }
    }

    /// The admin connection, reconnecting when the last one broke.
    fn admin(&self) -> Result<Arc<Client>> {
        let mut admin = self
            .admin
            .lock()
            .map_err(|_| self.config.error("lock poisoned"))?;
        if let Some(client) = admin.as_ref().filter(|c| !c.is_closed()) {
            return Ok(client.clone());
        }
        let config = self.config.clone();
        let client = block_on(async move { connection::connect(&config).await })??;
        *admin = Some(client.clone());
        Ok(client)
    }
}

/// What a subtask prepared for one epoch.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PreparedTransaction {
    /// The prepared transaction's name (`gid`).
    transaction: String,
    /// Rows in it.
    rows: u64,
}

impl SinkFactory for PostgresSinkFactory {
    fn describe(&self) -> String {
        let mode = match &self.config.mode {
            WriteMode::Append => "append".to_string(),
            WriteMode::Upsert { key } => format!("upsert by {}", key.join(", ")),
        };
        format!(
            "postgres({}, {mode}, {})",
            self.config.table,
            self.config.server()
        )
    }

    fn output_places(&self) -> Vec<OutputPlace> {
        vec![self.config.place()]
    }

    fn create(&self, schema: &StreamSchema, ctx: &SinkContext) -> Result<Box<dyn Sink>> {
        let columns = sink::output_columns(schema)?;
        if schema.row_kind_index().is_some() && self.config.mode == WriteMode::Append {
            // The planner refuses this; appended rows cannot withdraw earlier ones.
            return Err(Error::config(
                "mode",
                "a changelog (rows that withdraw earlier rows) needs 'mode' = 'upsert'",
            ));
        }
        if let WriteMode::Upsert { key } = &self.config.mode {
            for k in key {
                if !columns.iter().any(|(name, _)| name == k) {
                    return Err(Error::config(
                        "key",
                        format!("key column `{k}` is not an output column"),
                    ));
                }
            }
        }
        {
            let mut prepared = self
                .prepared
                .lock()
                .map_err(|_| self.config.error("lock poisoned"))?;
            if !*prepared {
                let client = self.admin()?;
                let config = self.config.clone();
                let cols = columns.clone();
                let exactly_once = ctx.exactly_once;
                block_on(async move {
                    connection::prepare_target(&client, &config, &cols, exactly_once).await
                })??;
                *prepared = true;
            }
        }
        let config = self.config.clone();
        let client = block_on(async move { connection::connect(&config).await })??;
        Ok(Box::new(sink::PostgresSink::new(
            self.config.clone(),
            client,
            columns,
            *ctx,
        )))
    }

    fn output_owner(&self) -> Result<Option<OutputOwner>> {
        self.with_admin(ledger::owner)
    }

    fn claim_output(&self, owner: &OutputOwner, replace: bool) -> Result<Option<OutputOwner>> {
        self.with_admin(|client, config| ledger::claim(client, config, owner.clone(), replace))
    }

    fn committer(&self) -> Option<&dyn Committer> {
        Some(self)
    }
}

impl Committer for PostgresSinkFactory {
    fn commit(&self, committable: &Committable) -> Result<()> {
        let staged: PreparedTransaction = committable.decode("a PostgreSQL transaction")?;
        let epoch = committable.epoch.0 as i64;
        let subtask = committable.subtask as i32;
        self.with_admin(|client, config| {
            let staged = staged.clone();
            async move { commit_prepared(client, config, staged, subtask, epoch).await }
        })
    }

    fn staged_output(&self, committable: &Committable) -> Result<StagedOutput> {
        let staged: PreparedTransaction = committable.decode("a PostgreSQL transaction")?;
        let epoch = committable.epoch.0 as i64;
        let subtask = committable.subtask as i32;
        self.with_admin(|client, config| {
            let transaction = staged.transaction.clone();
            ledger::staged_output(client, config, subtask, epoch, transaction)
        })
    }

    // Rows carry no epoch, so what an epoch wrote cannot be told apart from the rest.
    fn unpublish(&self, after: Epoch) -> Result<Unpublished> {
        Ok(Unpublished::Cannot(format!(
            "PostgreSQL table `{}` cannot take back the rows epochs after {after} committed (rows carry no epoch); to start over, empty the table and delete its ledger rows (`DELETE FROM {} WHERE sink = '{}'`)",
            self.config.table, self.config.ledger_table, self.config.label
        )))
    }

    // Every ledger row is an epoch some run of this sink committed.
    fn published(&self) -> Result<usize> {
        self.with_admin(ledger::ledger_rows)
    }

    // Every leftover transaction of this job's prefix: recovery checks right before
    // this that no newer run has claimed the state (docs/engine.md, "Fencing").
    fn abort_staged(&self, _generation: u64) -> Result<usize> {
        self.with_admin(|client, config| async move { roll_back_leftovers(client, config).await })
    }
}

/// `COMMIT PREPARED` of a subtask's epoch, which may have committed before.
async fn commit_prepared(
    client: Arc<Client>,
    config: PostgresSinkConfig,
    staged: PreparedTransaction,
    subtask: i32,
    epoch: i64,
) -> Result<()> {
    let gid = staged.transaction.replace('\'', "''");
    match client
        .batch_execute(&format!("COMMIT PREPARED '{gid}'"))
        .await
    {
        Ok(()) => {}
        // Committed before (recovery repeats commits): the ledger says so. Only
        // the newest row per subtask is kept, and a newer epoch commits only
        // after the older ones it carries, so a row at or past it is proof.
        Err(e) if e.code() == Some(&SqlState::UNDEFINED_OBJECT) => {
            let found = client
                .query_opt(
                    &format!(
                        "SELECT 1 FROM {} WHERE sink = $1 AND subtask = $2 AND epoch >= $3 LIMIT 1",
                        types::quote_table(&config.ledger_table)
                    ),
                    &[&config.label, &subtask, &epoch],
                )
                .await
                .map_err(|e| config.db_error(e))?;
            if found.is_none() {
                return Err(config.error(format!(
                    "prepared transaction `{}` is gone and was never committed; \
                             its {} rows are lost (was it rolled back by hand?)",
                    staged.transaction, staged.rows
                )));
            }
        }
        Err(e) => return Err(config.db_error(e)),
    }
    // Older ledger rows of this subtask are no longer needed to tell anything.
    client
        .execute(
            &format!(
                "DELETE FROM {} WHERE sink = $1 AND subtask = $2 AND epoch < $3",
                types::quote_table(&config.ledger_table)
            ),
            &[&config.label, &subtask, &epoch],
        )
        .await
        .map_err(|e| config.db_error(e))?;
    Ok(())
}

/// Rolls back every prepared transaction of this sink (recovery: none is committed by
/// a manifest any more); returns how many.
async fn roll_back_leftovers(client: Arc<Client>, config: PostgresSinkConfig) -> Result<usize> {
    let prefix = config.transaction_prefix();
    let rows = client
        .query(
            "SELECT gid FROM pg_prepared_xacts \
                     WHERE database = current_database() AND starts_with(gid, $1)",
            &[&prefix],
        )
        .await
        .map_err(|e| config.db_error(e))?;
    for row in &rows {
        let gid: String = row.get(0);
        tracing::info!("rolling back prepared transaction `{gid}` (no checkpoint committed it)");
        client
            .batch_execute(&format!("ROLLBACK PREPARED '{}'", gid.replace('\'', "''")))
            .await
            .map_err(|e| config.db_error(e))?;
    }
    Ok(rows.len())
}
