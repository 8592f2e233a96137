//! `postgres`: a PostgreSQL table written exactly-once (append, or upsert by the
//! declared PRIMARY KEY), or read by key as a lookup table, with Flink's JDBC cache
//! options.

use super::{
    choice_option, count_option, duration_option, lookup_columns, refuse_options, required,
    secret_from_env, Connector, OptionSpec, SinkTable,
};
use crate::ddl::TableDef;
use crate::error::{Result, SqlError};
use riffle_connectors::{
    PostgresLookupConfig, PostgresLookupFactory, PostgresSinkConfig, PostgresSinkFactory, WriteMode,
};
use riffle_core::LookupTableFactory;
use std::sync::Arc;

/// A PostgreSQL table.
pub struct PostgresConnector;

const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "url",
        help: "postgres://user@host:port/database, without the password (required); add ?sslmode=verify-full&sslrootcert=/path/ca.pem for TLS",
    },
    OptionSpec {
        name: "table",
        help: "the target table, optionally schema.table (default: the SQL table's name)",
    },
    OptionSpec {
        name: "password.env",
        help: "name of the environment variable holding the password",
    },
    OptionSpec {
        name: "mode",
        help: "append, or upsert by the PRIMARY KEY (default: upsert when one is declared)",
    },
    OptionSpec {
        name: "create",
        help:
            "true to create the table from the output's columns when it is missing (default false)",
    },
    OptionSpec {
        name: "ledger_table",
        help: "table recording committed epochs (default riffle_sink_ledger)",
    },
    OptionSpec {
        name: "lookup.cache.max-rows",
        help: "lookup table: cache the answers of at most this many keys (with lookup.cache.ttl; default no cache)",
    },
    OptionSpec {
        name: "lookup.cache.ttl",
        help: "lookup table: how long a cached answer is reused, e.g. 10s (with lookup.cache.max-rows)",
    },
];

/// Options of a table written to, not read by key.
const SINK_ONLY: &[&str] = &["mode", "create", "ledger_table"];
/// Options of a lookup table.
const LOOKUP_ONLY: &[&str] = &["lookup.cache.max-rows", "lookup.cache.ttl"];

impl Connector for PostgresConnector {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn lookup(&self, table: &TableDef) -> Result<Arc<dyn LookupTableFactory>> {
        let url = required(table, "url", "postgres://riffle@127.0.0.1:5432/riffle")?;
        refuse_options(
            table,
            SINK_ONLY,
            "applies to a table riffle writes; this one is read by key (a lookup join)",
        )?;
        let rows = count_option(table, "lookup.cache.max-rows")?;
        let ttl = duration_option(table, "lookup.cache.ttl", None)?;
        let cache = match (rows, ttl) {
            (Some(rows), Some(ttl)) => Some((usize::try_from(rows).unwrap_or(usize::MAX), ttl)),
            (None, None) => None,
            _ => {
                return Err(SqlError::connector(
                    &table.name,
                    "set both 'lookup.cache.max-rows' and 'lookup.cache.ttl' to cache answers, or neither to ask PostgreSQL for every batch",
                ))
            }
        };
        let config = PostgresLookupConfig {
            url: url.to_string(),
            password: secret_from_env(table, "password.env")?.map(riffle_connectors::Secret::new),
            table: table.options.get("table").unwrap_or(&table.name).clone(),
            cache,
        };
        let schema = lookup_columns(table)?;
        let factory = PostgresLookupFactory::new(config, schema)
            .map_err(|e| SqlError::connector(&table.name, e.to_string()))?;
        Ok(Arc::new(factory))
    }

    fn sink(&self, table: &TableDef, pipeline: &str) -> Result<SinkTable> {
        let url = required(table, "url", "postgres://riffle@127.0.0.1:5432/riffle")?;
        refuse_options(
            table,
            LOOKUP_ONLY,
            "applies to a lookup table; this one is written by INSERT INTO",
        )?;
        let target = table.options.get("table").unwrap_or(&table.name);
        let default_mode = if table.primary_key.is_empty() {
            "append"
        } else {
            "upsert"
        };
        let mode =
            match choice_option(table, "mode", &["append", "upsert"], default_mode)? {
                "upsert" if table.primary_key.is_empty() => return Err(SqlError::connector(
                    &table.name,
                    "'mode' = 'upsert' needs the key: declare PRIMARY KEY (…) in the column list",
                )),
                "upsert" => WriteMode::Upsert {
                    key: table.primary_key.clone(),
                },
                _ => WriteMode::Append,
            };
        let updates = match &mode {
            WriteMode::Upsert { .. } => Ok(()),
            WriteMode::Append => Err(format!(
                "`{}` appends rows; declare PRIMARY KEY (…) on it to upsert the result by key",
                table.name
            )),
        };
        let mut config = PostgresSinkConfig::new(url, target, format!("{pipeline}/{}", table.name));
        config.mode = mode;
        config.create_table =
            choice_option(table, "create", &["true", "false"], "false")? == "true";
        if let Some(ledger) = table.options.get("ledger_table") {
            config.ledger_table = ledger.clone();
        }
        config.password =
            secret_from_env(table, "password.env")?.map(riffle_connectors::Secret::new);
        let factory = PostgresSinkFactory::new(config)
            .map_err(|e| SqlError::connector(&table.name, e.to_string()))?;
        Ok(SinkTable {
            factory: Arc::new(factory),
            // An upsert table deletes a withdrawn row's key.
            retractions: updates.clone(),
            updates,
            nested: false,
            needs_withdrawals: false,
        })
    }
}
