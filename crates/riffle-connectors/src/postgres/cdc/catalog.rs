//! What a CDC source checks in PostgreSQL's catalog before it reads: that the table's
//! changes can name their rows, that the publication streams all of them, where the slot
//! and the server's WAL stand.

use super::position::parse_lsn;
use super::rows::PgColumn;
use super::PostgresCdcConfig;
use crate::postgres::types::quote_ident;
use riffle_core::{Error, Result};
use tokio_postgres::Client;

/// The table must be one plain table whose changes name their rows by the declared key:
/// a partitioned or inherited table's changes arrive under its children's names, and
/// a key that is not one of the table's own would merge distinct rows.
pub(super) async fn check_table(sql: &Client, config: &PostgresCdcConfig) -> Result<()> {
    let table = config.qualified();
    let failed = |e| config.failure(&format!("cannot read the columns of {table}"), e);
    let shape = sql
        .query_one(
            "SELECT c.relkind::text, c.relreplident::text, c.relhassubclass \
             FROM pg_class c WHERE c.oid = $1::text::regclass",
            &[&table],
        )
        .await
        .map_err(failed)?;
    let (kind, identity_kind, children): (String, String, bool) =
        (shape.get(0), shape.get(1), shape.get(2));
    if kind != "r" || children {
        return Err(config.refusal(format!(
            "{table} is {}: its rows' changes arrive under its partitions' or children's names; read each partition as its own table",
            if kind == "p" { "a partitioned table" } else if children { "a table with inheritance children" } else { "not a plain table" }
        )));
    }
    let rows = sql
        .query(
            "SELECT a.attname::text, coalesce(a.attnum = ANY(i.indkey), false) \
             FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped \
             LEFT JOIN pg_index i ON i.indrelid = c.oid \
               AND ((c.relreplident = 'd' AND i.indisprimary) OR (c.relreplident = 'i' AND i.indisreplident)) \
             WHERE c.oid = $1::text::regclass ORDER BY a.attnum",
            &[&table],
        )
        .await
        .map_err(failed)?;
    let columns: Vec<PgColumn> = rows
        .iter()
        .map(|r| PgColumn {
            name: r.get(0),
            identity: r.get(1),
        })
        .collect();
    let full = identity_kind == "f";
    super::rows::ColumnMap::new(&table, &config.columns, &config.key, &columns, full)?;
    let unique: Vec<Vec<String>> = sql
        .query(
            "SELECT array_agg(a.attname::text) FROM pg_index i \
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) \
             WHERE i.indrelid = $1::text::regclass AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL \
             GROUP BY i.indexrelid HAVING bool_and(a.attnotnull)",
            &[&table],
        )
        .await
        .map_err(failed)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    super::rows::check_key(&table, &config.key, &unique)
}

/// The publication the slot streams: made for the table on a job's first start; an
/// existing one must publish every kind of change of the table, unfiltered.
pub(super) async fn ensure_publication(
    sql: &Client,
    config: &PostgresCdcConfig,
    first: bool,
) -> Result<()> {
    let rows = sql
        .query(
            "SELECT p.pubinsert AND p.pubupdate AND p.pubdelete AND p.pubtruncate, \
                    EXISTS (SELECT 1 FROM pg_publication_tables t WHERE t.pubname = p.pubname AND t.schemaname = $2 AND t.tablename = $3), \
                    (SELECT (to_jsonb(r) ->> 'prqual') IS NOT NULL OR (to_jsonb(r) ->> 'prattrs') IS NOT NULL \
                       FROM pg_publication_rel r WHERE r.prpubid = p.oid AND r.prrelid = $4::text::regclass) \
             FROM pg_publication p WHERE p.pubname = $1",
            &[&config.publication, &config.schema, &config.table, &config.qualified()],
        )
        .await
        .map_err(|e| config.failure("cannot read the publications", e))?;
    let name = quote_ident(&config.publication);
    let Some(row) = rows.first() else {
        if !first {
            // Recreated now, it would stream only what changes from now on: the
            // changes since the checkpoint would be skipped without a word.
            return Err(config.refusal(format!(
                "the publication `{}` the slot streams is gone; the changes since the checkpoint went unpublished: start afresh (a new 'slot.name', or without the checkpoint)",
                config.publication
            )));
        }
        return sql
            .batch_execute(&format!(
                "CREATE PUBLICATION {name} FOR TABLE {}",
                config.qualified()
            ))
            .await
            .map_err(|e| config.failure("cannot create the publication", e));
    };
    let (every_kind, has_table, filtered): (bool, bool, Option<bool>) =
        (row.get(0), row.get(1), row.get(2));
    let wrong = if !has_table {
        Some(format!(
            "does not publish {}: ALTER PUBLICATION {name} ADD TABLE {}",
            config.qualified(),
            config.qualified()
        ))
    } else if !every_kind {
        Some(format!("does not publish every insert, update, delete and truncate: ALTER PUBLICATION {name} SET (publish = 'insert, update, delete, truncate')"))
    } else if filtered == Some(true) {
        Some(format!("publishes {} with a row filter or a column list, so some changes would never arrive: publish the whole table", config.qualified()))
    } else {
        None
    };
    match wrong {
        Some(why) => Err(config.refusal(format!(
            "the publication `{}` {why}, or name another 'debezium.publication.name'",
            config.publication
        ))),
        None => Ok(()),
    }
}

/// Where the server's WAL ends now.
pub(super) async fn server_end(sql: &Client, config: &PostgresCdcConfig) -> Result<u64> {
    let row = sql
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .await
        .map_err(|e| config.failure("cannot read the server's WAL position", e))?;
    let text: String = row.get(0);
    parse_lsn(&text).ok_or_else(|| {
        Error::external(
            "postgres-cdc",
            format!("a WAL position `{text}` that is not an LSN"),
        )
    })
}

/// The slot's confirmed LSN, if the slot exists (a slot of another plugin is refused).
pub(super) async fn slot_state(sql: &Client, config: &PostgresCdcConfig) -> Result<Option<u64>> {
    let rows = sql
        .query(
            "SELECT plugin::text, database::text, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
            &[&config.slot],
        )
        .await
        .map_err(|e| config.failure("cannot read the replication slots", e))?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let (plugin, database, confirmed): (Option<String>, Option<String>, Option<String>) =
        (row.get(0), row.get(1), row.get(2));
    if plugin.as_deref() != Some("pgoutput") || database.as_deref() != Some(&config.database) {
        return Err(config.refusal(format!(
            "the replication slot `{}` is not a pgoutput slot of database `{}` (plugin {}, database {})",
            config.slot,
            config.database,
            plugin.unwrap_or_default(),
            database.unwrap_or_default()
        )));
    }
    Ok(Some(confirmed.as_deref().and_then(parse_lsn).unwrap_or(0)))
}
