//! Connecting to PostgreSQL and preparing the target: the table (created when asked,
//! otherwise checked column by column), the commit ledger, and prepared transactions.

use super::tls::{connector, split_tls_params, TlsMode};
use super::types::{quote_ident, quote_table, PgType};
use super::{PostgresSinkConfig, WriteMode};
use riffle_core::{Error, Result};
use std::sync::Arc;
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, NoTls, Socket};

/// Connects with `config`'s URL and password, over TLS when the URL asks for it; the
/// connection is driven on the connectors' runtime (this runs inside it).
pub(crate) async fn connect(config: &PostgresSinkConfig) -> Result<Arc<Client>> {
    let (url, tls) = split_tls_params(&config.url)?;
    let mut pg: tokio_postgres::Config = url
        .parse()
        .map_err(|e| Error::config("url", format!("not a PostgreSQL URL: {e}")))?;
    if let Some(password) = &config.password {
        pg.password(password.reveal());
    }
    pg.application_name("riffle");
    let failed = |e: tokio_postgres::Error, unreachable: &str| {
        // The server answered: say what to change rather than ask whether it runs.
        let hint = match e.as_db_error() {
            Some(db) if db.message().contains("no encryption") => {
                "the server takes only TLS connections: add ?sslmode=verify-full (and sslrootcert=/path/ca.pem) to the URL"
            }
            Some(_) => "the server refused the connection",
            None => unreachable,
        };
        config.error(format!("cannot connect: {}; {hint}", error_chain(&e)))
    };
    let client = match tls {
        TlsMode::Off => open(&pg, NoTls)
            .await
            .map_err(|e| failed(e, "is the server running?"))?,
        TlsMode::Verified { root_cert } => {
            pg.ssl_mode(SslMode::Require);
            open(&pg, connector(root_cert.as_deref())?)
                .await
                .map_err(|e| {
                    failed(
                        e,
                        "is the server running with TLS, and is its certificate signed by the sslrootcert CA (or a system CA) for this host name?",
                    )
                })?
        }
    };
    Ok(Arc::new(client))
}

/// Connects through `tls` and drives the connection on this runtime until it ends.
async fn open<T>(
    pg: &tokio_postgres::Config,
    tls: T,
) -> std::result::Result<Client, tokio_postgres::Error>
where
    T: MakeTlsConnect<Socket>,
    T::Stream: Send + 'static,
{
    let (client, connection) = pg.connect(tls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("PostgreSQL connection ended: {e}");
        }
    });
    Ok(client)
}

/// A client error with its causes (its display alone says only "error connecting to
/// server" or "error performing TLS handshake").
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// Makes the target ready for `columns`: checks prepared transactions are enabled (when
/// exactly-once), creates or checks the table, and creates the ledger.
pub(crate) async fn prepare_target(
    client: &Client,
    config: &PostgresSinkConfig,
    columns: &[(String, PgType)],
    exactly_once: bool,
) -> Result<()> {
    let err = |e: tokio_postgres::Error| config.db_error(e);
    if exactly_once {
        let row = client
            .query_one("SHOW max_prepared_transactions", &[])
            .await
            .map_err(err)?;
        let max: String = row.get(0);
        if max.trim() == "0" {
            return Err(config.error(
                "max_prepared_transactions is 0, so exactly-once commits (PREPARE TRANSACTION) \
                 are disabled; set it above the sink's parallelism in postgresql.conf and \
                 restart the server",
            ));
        }
    }
    let table = quote_table(&config.table);
    if config.create_table {
        let mut defs: Vec<String> = columns
            .iter()
            .map(|(name, ty)| format!("{} {}", quote_ident(name), ty.sql()))
            .collect();
        if let WriteMode::Upsert { key } = &config.mode {
            let key: Vec<String> = key.iter().map(|k| quote_ident(k)).collect();
            defs.push(format!("PRIMARY KEY ({})", key.join(", ")));
        }
        client
            .batch_execute(&format!(
                "CREATE TABLE IF NOT EXISTS {table} ({})",
                defs.join(", ")
            ))
            .await
            .map_err(err)?;
    }
    check_columns(client, config, columns).await?;
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {} (sink TEXT NOT NULL, subtask INTEGER NOT NULL, \
             epoch BIGINT NOT NULL, committed_at TIMESTAMPTZ NOT NULL DEFAULT now(), \
             PRIMARY KEY (sink, subtask, epoch))",
            quote_table(&config.ledger_table)
        ))
        .await
        .map_err(err)?;
    Ok(())
}

/// The table must exist and have every output column with a type that holds it.
async fn check_columns(
    client: &Client,
    config: &PostgresSinkConfig,
    columns: &[(String, PgType)],
) -> Result<()> {
    let (schema, table) = match config.table.split_once('.') {
        Some((s, t)) => (s.to_string(), t.to_string()),
        None => ("public".to_string(), config.table.clone()),
    };
    let rows = client
        .query(
            "SELECT column_name, data_type FROM information_schema.columns \
             WHERE table_schema = $1 AND table_name = $2",
            &[&schema, &table],
        )
        .await
        .map_err(|e| config.db_error(e))?;
    if rows.is_empty() {
        return Err(config.error(format!(
            "table `{}` does not exist; create it, or set 'create' = 'true'",
            config.table
        )));
    }
    let existing: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    for (name, ty) in columns {
        match existing.iter().find(|(n, _)| n == name) {
            None => {
                return Err(config.error(format!(
                    "table `{}` has no column `{name}` (it has: {})",
                    config.table,
                    existing
                        .iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
            Some((_, data_type)) if !ty.fits(data_type) => {
                return Err(config.error(format!(
                    "column `{name}` of table `{}` is {data_type}, which cannot hold {}",
                    config.table,
                    ty.sql()
                )))
            }
            Some(_) => {}
        }
    }
    Ok(())
}
