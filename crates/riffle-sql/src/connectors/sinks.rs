//! `stdout` and `blackhole`: sinks that show or count rows.

use super::{Connector, OptionSpec, SinkTable};
use crate::ddl::TableDef;
use crate::error::{Result, SqlError};
use riffle_connectors::sinks::{BlackholeSinkFactory, StdoutFormat, StdoutSinkFactory};
use std::sync::Arc;

/// Prints rows (`'format' = 'jsonl' | 'pretty'`).
pub struct StdoutConnector;

impl Connector for StdoutConnector {
    fn name(&self) -> &'static str {
        "stdout"
    }

    fn options(&self) -> &'static [OptionSpec] {
        &[OptionSpec {
            name: "format",
            help: "jsonl (default) or pretty",
        }]
    }

    fn sink(&self, table: &TableDef, _: &str) -> Result<SinkTable> {
        let format = match table.options.get("format").map(String::as_str) {
            None | Some("jsonl") | Some("json") => StdoutFormat::Jsonl,
            Some("pretty") => StdoutFormat::Pretty,
            Some(other) => {
                return Err(SqlError::connector(
                    &table.name,
                    format!("'format' = '{other}': stdout prints jsonl or pretty"),
                ))
            }
        };
        Ok(SinkTable {
            factory: Arc::new(StdoutSinkFactory::new(format)),
            updates: Ok(()),
            retractions: Ok(()),
            nested: true,
            needs_withdrawals: false,
        })
    }
}

/// Counts rows and drops them (benchmarks).
pub struct BlackholeConnector;

impl Connector for BlackholeConnector {
    fn name(&self) -> &'static str {
        "blackhole"
    }

    fn options(&self) -> &'static [OptionSpec] {
        &[]
    }

    fn sink(&self, _: &TableDef, _: &str) -> Result<SinkTable> {
        Ok(SinkTable {
            factory: Arc::new(BlackholeSinkFactory),
            updates: Ok(()),
            retractions: Ok(()),
            nested: true,
            needs_withdrawals: false,
        })
    }
}
