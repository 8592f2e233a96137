//! `postgres-cdc` (Flink CDC's connector of that name and options): a PostgreSQL
//! table's rows and then its changes, read through logical replication (pgoutput), as
//! an upsert stream keyed by the PRIMARY KEY that the planner turns into a changelog
//! (docs/connectors.md, "PostgreSQL CDC").

use super::{
    choice_option, count_option, required, required_watermark, secret_from_env, Connector,
    OptionSpec, RunSettings, SourceTable,
};
use crate::ddl::TableDef;
use crate::error::{Result, SqlError};
use riffle_connectors::{CdcStartup, PostgresCdcConfig, PostgresCdcFactory};
use riffle_core::arrow::datatypes::Schema;
use riffle_runtime::WatermarkStrategy;
use std::sync::Arc;

/// A PostgreSQL table's change stream.
pub struct PostgresCdcConnector;

const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "hostname",
        help: "the server's host (required)",
    },
    OptionSpec {
        name: "port",
        help: "the server's port (default 5432)",
    },
    OptionSpec {
        name: "username",
        help: "a user with the REPLICATION attribute who may read the table (required)",
    },
    OptionSpec {
        name: "password",
        help: "not taken inline: put the password in an environment variable and name it with 'password.env'",
    },
    OptionSpec {
        name: "password.env",
        help: "name of the environment variable holding the password",
    },
    OptionSpec {
        name: "database-name",
        help: "the database (required)",
    },
    OptionSpec {
        name: "schema-name",
        help: "the table's schema (default public)",
    },
    OptionSpec {
        name: "table-name",
        help: "the table (required)",
    },
    OptionSpec {
        name: "slot.name",
        help: "the logical replication slot, created by the job's first run (required; lower-case letters, digits, _)",
    },
    OptionSpec {
        name: "decoding.plugin.name",
        help: "pgoutput (the only one read)",
    },
    OptionSpec {
        name: "debezium.publication.name",
        help: "the publication the slot streams (default: the slot's name with _publication; created for the table when missing)",
    },
    OptionSpec {
        name: "scan.startup.mode",
        help: "initial (default: the table's rows, then its changes) or latest-offset (changes after the first start only)",
    },
    OptionSpec {
        name: "scan.max-records-per-second",
        help: "read at most this many rows and changes per second (default: no limit)",
    },
];

impl Connector for PostgresCdcConnector {
    fn name(&self) -> &'static str {
        "postgres-cdc"
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn source(&self, table: &TableDef, _: &RunSettings) -> Result<SourceTable> {
        let refuse = |message: String| SqlError::connector(&table.name, message);
        if table.options.contains_key("password") {
            return Err(refuse(
                "'password' is not taken inline, where it would show in the pipeline text: export it in an environment variable and name that with 'password.env'".into(),
            ));
        }
        if table.primary_key.is_empty() {
            return Err(refuse(
                "a postgres-cdc table needs PRIMARY KEY (…) NOT ENFORCED: the key its changes replace and delete rows by (the table's own primary key)".into(),
            ));
        }
        if table.columns.is_empty() {
            return Err(refuse(
                "a postgres-cdc table needs its columns declared".into(),
            ));
        }
        choice_option(table, "decoding.plugin.name", &["pgoutput"], "pgoutput")?;
        let startup = match choice_option(
            table,
            "scan.startup.mode",
            &["initial", "latest-offset"],
            "initial",
        )? {
            "latest-offset" => CdcStartup::LatestOffset,
            _ => CdcStartup::Initial,
        };
        let port = match table.options.get("port") {
            None => 5432,
            Some(text) => text
                .trim()
                .parse()
                .map_err(|_| refuse(format!("'port' = '{text}' is not a port number")))?,
        };
        let slot = required(table, "slot.name", "orders_slot")?.to_string();
        let watermark = required_watermark(table, "a postgres-cdc table")?;
        let config = PostgresCdcConfig {
            host: required(table, "hostname", "localhost")?.to_string(),
            port,
            user: required(table, "username", "riffle")?.to_string(),
            password: secret_from_env(table, "password.env")?.map(riffle_connectors::Secret::new),
            database: required(table, "database-name", "shop")?.to_string(),
            schema: table
                .options
                .get("schema-name")
                .cloned()
                .unwrap_or_else(|| "public".into()),
            table: required(table, "table-name", "orders")?.to_string(),
            publication: table
                .options
                .get("debezium.publication.name")
                .cloned()
                .unwrap_or_else(|| format!("{slot}_publication")),
            slot,
            columns: Arc::new(Schema::new(table.columns.clone())),
            key: table.primary_key.clone(),
            event_column: watermark.column.clone(),
            startup,
            max_records_per_second: match count_option(table, "scan.max-records-per-second")? {
                Some(0) => {
                    return Err(refuse(
                        "'scan.max-records-per-second' must be at least 1: at 0 nothing would ever be read".into(),
                    ))
                }
                rate => rate,
            },
            batch_rows: 4096,
        };
        let factory = PostgresCdcFactory::new(config).map_err(|e| refuse(e.to_string()))?;
        Ok(SourceTable {
            factory: Arc::new(factory),
            event_time: watermark.column,
            watermarks: WatermarkStrategy {
                max_out_of_orderness: watermark.delay,
                idle_timeout: None,
            },
            expected_rows: None,
            sql_names: None,
            upsert_key: Some(table.primary_key.clone()),
        })
    }
}
