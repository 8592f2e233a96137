//! What the sink's bookkeeping tables say about its target: which epochs the ledger
//! records as committed (so an earlier run published rows), and which pipeline owns the
//! table (`riffle_output_owners`; docs/engine.md, "One owner per output").

use super::types::quote_table;
use super::PostgresSinkConfig;
use riffle_core::{Error, OutputOwner, Result, StagedOutput};
use std::sync::Arc;
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

/// The table recording each target table's owner, next to the ledger.
fn owner_table(config: &PostgresSinkConfig) -> String {
    match config.ledger_table.rsplit_once('.') {
        Some((schema, _)) => format!("{schema}.riffle_output_owners"),
        None => "riffle_output_owners".into(),
    }
}

/// The target as the owner table keys it: schema-qualified (`public` by default).
pub(super) fn target(config: &PostgresSinkConfig) -> String {
    if config.table.contains('.') {
        config.table.clone()
    } else {
        format!("public.{}", config.table)
    }
}

/// Where subtask `subtask`'s output of `epoch`, staged as prepared transaction
/// `transaction`, stands: published when the ledger holds a row of the subtask at or
/// past the epoch (a commit keeps only the newest row per subtask, and a newer epoch
/// commits only after the older ones), staged while the prepared transaction exists,
/// else lost. A ledger table that is gone records nothing.
pub(super) async fn staged_output(
    client: Arc<Client>,
    config: PostgresSinkConfig,
    subtask: i32,
    epoch: i64,
    transaction: String,
) -> Result<StagedOutput> {
    let query = format!(
        "SELECT 1 FROM {} WHERE sink = $1 AND subtask = $2 AND epoch >= $3 LIMIT 1",
        quote_table(&config.ledger_table)
    );
    match client
        .query_opt(&query, &[&config.label, &subtask, &epoch])
        .await
    {
        Ok(Some(_)) => return Ok(StagedOutput::Published),
        Ok(None) => {}
        Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => {}
        Err(e) => return Err(config.db_error(e)),
    }
    let prepared = client
        .query_opt(
            "SELECT 1 FROM pg_prepared_xacts WHERE database = current_database() AND gid = $1",
            &[&transaction],
        )
        .await
        .map_err(|e| config.db_error(e))?;
    Ok(if prepared.is_some() {
        StagedOutput::Staged
    } else {
        StagedOutput::Lost
    })
}

/// How many ledger rows this sink has (0 before the ledger exists).
pub(super) async fn ledger_rows(client: Arc<Client>, config: PostgresSinkConfig) -> Result<usize> {
    let query = format!(
        "SELECT count(*) FROM {} WHERE sink = $1",
        quote_table(&config.ledger_table)
    );
    match client.query_one(&query, &[&config.label]).await {
        Ok(row) => Ok(row.get::<_, i64>(0).max(0) as usize),
        Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => Ok(0),
        Err(e) => Err(config.db_error(e)),
    }
}

/// The owner recorded for the target table, if any.
pub(super) async fn owner(
    client: Arc<Client>,
    config: PostgresSinkConfig,
) -> Result<Option<OutputOwner>> {
    let query = format!(
        "SELECT owner FROM {} WHERE target = $1",
        quote_table(&owner_table(&config))
    );
    let row = match client.query_opt(&query, &[&target(&config)]).await {
        Ok(row) => row,
        Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => return Ok(None),
        Err(e) => return Err(config.db_error(e)),
    };
    row.map(|row| {
        let text: String = row.get(0);
        serde_json::from_str(&text).map_err(|e| {
            Error::config(
                owner_table(&config),
                format!(
                    "the owner of `{}` is not an owner record: {e}",
                    target(&config)
                ),
            )
        })
    })
    .transpose()
}

/// Records `owner` for the target table unless one is (or always, with `replace`);
/// returns the owner recorded afterwards.
pub(super) async fn claim(
    client: Arc<Client>,
    config: PostgresSinkConfig,
    owner: OutputOwner,
    replace: bool,
) -> Result<Option<OutputOwner>> {
    let table = quote_table(&owner_table(&config));
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {table} (target TEXT PRIMARY KEY, owner TEXT NOT NULL, \
             claimed_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        ))
        .await
        .map_err(|e| config.db_error(e))?;
    let conflict = if replace {
        "DO UPDATE SET owner = EXCLUDED.owner, claimed_at = now()"
    } else {
        "DO NOTHING"
    };
    let json = serde_json::to_string(&owner).map_err(|e| config.error(e))?;
    client
        .execute(
            &format!("INSERT INTO {table} (target, owner) VALUES ($1, $2) ON CONFLICT (target) {conflict}"),
            &[&target(&config), &json],
        )
        .await
        .map_err(|e| config.db_error(e))?;
    self::owner(client, config).await
}
