//! `iceberg`: an Apache Iceberg table written exactly once, through a SQL catalog
//! (SQLite file or PostgreSQL) or a REST catalog. Built with the cargo feature `iceberg` (`cargo build
//! --release -p riffle-cli --features iceberg`; the test suite builds it); without it,
//! naming the connector says how to get it.

use super::{Connector, OptionSpec, SinkTable};
use crate::ddl::TableDef;
use crate::error::{Result, SqlError};

/// An Iceberg table.
pub struct IcebergConnector;

const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "catalog.type",
        help: "sql (the default: a catalog in a SQLite file or a PostgreSQL database) or rest (a REST catalog server)",
    },
    OptionSpec {
        name: "catalog.uri",
        help: "sqlite:///path/catalog.db or postgresql://user@host:port/database; for rest, http://host:port (required)",
    },
    OptionSpec {
        name: "catalog.name",
        help: "the catalog's name; readers open the catalog under the same name (default riffle)",
    },
    OptionSpec {
        name: "catalog.credential.env",
        help: "rest: the environment variable holding OAuth2 client credentials (client_id:client_secret), exchanged for a token at the catalog's token endpoint before each commit",
    },
    OptionSpec {
        name: "catalog.token.env",
        help: "rest: the environment variable holding a bearer token sent as it is",
    },
    OptionSpec {
        name: "catalog.oauth2-server-uri",
        help: "rest: the token endpoint, when it is not the catalog's own /v1/oauth/tokens",
    },
    OptionSpec {
        name: "catalog.scope",
        help: "rest: the OAuth2 scope asked for (default catalog)",
    },
    OptionSpec {
        name: "warehouse",
        help: "where new tables go: file:///path or s3://bucket/prefix (required)",
    },
    OptionSpec {
        name: "table",
        help: "namespace.name of the Iceberg table (required)",
    },
    OptionSpec {
        name: "create",
        help: "true to create the table (and namespace) from the declared columns when missing (default false)",
    },
    OptionSpec {
        name: "compression",
        help: "the data files' Parquet page codec: snappy (the default), zstd (level 1), lz4 (LZ4_RAW) or uncompressed",
    },
    OptionSpec {
        name: "epochs-per-commit",
        help: "how many checkpoints one Iceberg snapshot covers (default 1: a snapshot per checkpoint); rows become visible every that many checkpoints",
    },
    OptionSpec {
        name: "target-file-size",
        help: "roll data files at this size, e.g. 128mb (default 128mb)",
    },
];

impl Connector for IcebergConnector {
    fn name(&self) -> &'static str {
        "iceberg"
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn writes_partitions(&self) -> bool {
        true
    }

    #[cfg(feature = "iceberg")]
    fn sink(&self, table: &TableDef, pipeline: &str) -> Result<SinkTable> {
        use super::{
            bytes_option, choice_option, count_option, refuse_options, required, secret_from_env,
        };
        use riffle_core::arrow::datatypes::Schema;
        use riffle_iceberg::{
            transform_name, CatalogConfig, CatalogKind, Codec, DeclaredField, IcebergSinkConfig,
            IcebergSinkFactory, RestAuth,
        };
        use std::sync::Arc;

        let kind = match choice_option(table, "catalog.type", &["sql", "rest"], "sql")? {
            "rest" => CatalogKind::Rest,
            _ => CatalogKind::Sql,
        };
        const REST_AUTH: [&str; 4] = [
            "catalog.credential.env",
            "catalog.token.env",
            "catalog.oauth2-server-uri",
            "catalog.scope",
        ];
        if kind == CatalogKind::Sql {
            refuse_options(
                table,
                &REST_AUTH,
                "signs in to a REST catalog; a SQL catalog takes its user and password in 'catalog.uri'",
            )?;
        }
        let auth = RestAuth {
            credential: secret_from_env(table, "catalog.credential.env")?,
            token: secret_from_env(table, "catalog.token.env")?,
            oauth2_server_uri: table.options.get("catalog.oauth2-server-uri").cloned(),
            scope: table.options.get("catalog.scope").cloned(),
        };
        if table.columns.is_empty() {
            return Err(SqlError::connector(
                &table.name,
                "an Iceberg table needs its columns declared: CREATE TABLE name (auction BIGINT, price BIGINT, …) WITH ('connector' = 'iceberg', …)",
            ));
        }
        let partition_by = table
            .partitioned_by
            .iter()
            .map(|term| {
                let transform =
                    transform_name(term.function.as_deref(), term.width).map_err(|e| {
                        SqlError::connector(&table.name, format!("PARTITIONED BY {term}: {e}"))
                    })?;
                Ok(DeclaredField {
                    column: term.column.clone(),
                    transform,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let config = IcebergSinkConfig {
            catalog: CatalogConfig {
                kind,
                name: table
                    .options
                    .get("catalog.name")
                    .cloned()
                    .unwrap_or_else(|| "riffle".into()),
                uri: required(table, "catalog.uri", "sqlite:///var/lib/riffle/catalog.db")?.into(),
                warehouse: required(table, "warehouse", "file:///var/lib/riffle/warehouse")?.into(),
                auth,
            },
            table: required(table, "table", "nexmark.bids")?.into(),
            create: choice_option(table, "create", &["true", "false"], "false")? == "true",
            target_file_bytes: bytes_option(table, "target-file-size")?.unwrap_or(128 << 20),
            partition_by,
            // choice_option answers one of the names, so the default is never taken.
            codec: Codec::from_name(choice_option(
                table,
                "compression",
                &Codec::NAMES,
                Codec::default().name(),
            )?)
            .unwrap_or_default(),
            sink_id: format!("{pipeline}/{}", table.name),
            epochs_per_commit: match count_option(table, "epochs-per-commit")? {
                None => 1,
                Some(n) if n >= 1 => n,
                Some(_) => {
                    return Err(SqlError::connector(
                        &table.name,
                        "'epochs-per-commit' must be at least 1 (1: one snapshot per checkpoint)",
                    ))
                }
            },
        };
        let declared = Arc::new(Schema::new(table.columns.clone()));
        let factory = IcebergSinkFactory::new(config, declared)
            .map_err(|e| SqlError::connector(&table.name, e.to_string()))?;
        Ok(SinkTable {
            factory: Arc::new(factory),
            updates: Err(format!(
                "`{}` is an Iceberg table, which riffle appends to; an updating result needs row-level deletes, which riffle does not write to Iceberg yet: aggregate over a window (GROUP BY window_start, window_end, …) to append final rows",
                table.name
            )),
            retractions: Err(format!(
                "`{}` is an Iceberg table, and riffle does not write row-level deletes yet",
                table.name
            )),
            nested: false,
            needs_withdrawals: false,
        })
    }

    #[cfg(not(feature = "iceberg"))]
    fn sink(&self, table: &TableDef, _pipeline: &str) -> Result<SinkTable> {
        Err(SqlError::connector(
            &table.name,
            "this riffle was built without Iceberg support; build it with `cargo build --release -p riffle-cli --features iceberg`",
        ))
    }
}
