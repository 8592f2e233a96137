//! Tables as connectors: a registry of connector factories, each with the options it
//! accepts. `CREATE TABLE … WITH ('connector' = 'name', …)` picks a factory; the options
//! are checked against its list before it builds a source or a sink.

mod file_partitions;
mod filesystem;
mod iceberg;
mod kafka;
mod nexmark;
mod postgres;
mod postgres_cdc;
mod sequence;
mod sinks;
mod upsert_kafka;

use crate::ddl::{TableDef, Watermark};
use crate::error::{Result, SqlError};
use riffle_connectors::MalformedRecords;
use riffle_core::arrow::datatypes::{Schema, SchemaRef};
use riffle_core::{LookupTableFactory, SinkFactory, SourceFactory};
use riffle_runtime::WatermarkStrategy;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub use filesystem::FilesystemConnector;
pub use iceberg::IcebergConnector;
pub use kafka::KafkaConnector;
pub use nexmark::NexmarkConnector;
pub use postgres::PostgresConnector;
pub use postgres_cdc::PostgresCdcConnector;
pub use sequence::SequenceConnector;
pub use sinks::{BlackholeConnector, StdoutConnector};
pub use upsert_kafka::UpsertKafkaConnector;

/// One option a connector accepts.
#[derive(Debug, Clone, Copy)]
pub struct OptionSpec {
    /// Key, lower case; `prefix.*` accepts every key with that prefix.
    pub name: &'static str,
    /// What it means, for error messages and docs.
    pub help: &'static str,
}

/// A table read as a stream.
pub struct SourceTable {
    /// Builds the source subtasks.
    pub factory: Arc<dyn SourceFactory>,
    /// The column whose values are the rows' event time.
    pub event_time: String,
    /// How the watermark follows event time.
    pub watermarks: WatermarkStrategy,
    /// Rows the source will produce, when known (for progress).
    pub expected_rows: Option<u64>,
    /// The names SQL reads the columns by, in order, when they are not the source's
    /// own (a nexmark table declared with Flink's `dateTime`, `itemName`, …).
    pub sql_names: Option<Vec<String>>,
    /// An upsert source keyed by these columns: its rows are `+U` (the key's new row)
    /// and `-D` (the key deleted), which the planner turns into a changelog by the key.
    pub upsert_key: Option<Vec<String>>,
}

/// A table written by `INSERT INTO`.
pub struct SinkTable {
    /// Builds the sink subtasks.
    pub factory: Arc<dyn SinkFactory>,
    /// Whether the sink can take an updating result (rows that replace earlier rows of
    /// the same key), and why not when it cannot.
    pub updates: std::result::Result<(), String>,
    /// Whether the sink can take a changelog (rows that withdraw earlier rows: the `-U`
    /// of a filtered GROUP BY), and why not when it cannot.
    pub retractions: std::result::Result<(), String>,
    /// Whether the sink can write nested values (a window `{start, end}`); CSV cannot.
    pub nested: bool,
    /// Whether the sink writes a replaced row's withdrawal before its new row (a
    /// Debezium `d` of the `before`, then the `c` of the `after`), so an updating result
    /// is planned as a changelog, with the `-U` of each replaced row.
    pub needs_withdrawals: bool,
}

/// Settings given on the command line that override table options.
#[derive(Debug, Clone, Default)]
pub struct RunSettings {
    /// Events of every generated table, Nexmark or sequence (`--events`).
    pub nexmark_events: Option<u64>,
    /// Wall-clock event rate cap of every Nexmark table (`--throttle`).
    pub nexmark_throttle: Option<u64>,
}

/// A kind of external system a table can name.
pub trait Connector: Send + Sync {
    /// The `'connector'` value.
    fn name(&self) -> &'static str;

    /// The options it accepts (besides `connector`).
    fn options(&self) -> &'static [OptionSpec];

    /// Whether its sink writes the partitions of `PARTITIONED BY (…)`; a connector that
    /// does not has the clause refused (it would be ignored).
    fn writes_partitions(&self) -> bool {
        false
    }

    /// Builds the source of `table`.
    ///
    /// # Errors
    /// Missing or invalid options; a connector that only writes.
    fn source(&self, table: &TableDef, _settings: &RunSettings) -> Result<SourceTable> {
        Err(SqlError::connector(
            &table.name,
            format!(
                "the {} connector only writes; it cannot be read with SELECT",
                self.name()
            ),
        ))
    }

    /// Builds the sink of `table` in the job named `pipeline` (a sink names what it
    /// creates outside riffle after it, e.g. PostgreSQL's prepared transactions).
    ///
    /// # Errors
    /// Missing or invalid options; a connector that only reads.
    /// The table as a lookup table (`JOIN table FOR SYSTEM_TIME AS OF …`).
    ///
    /// # Errors
    /// The connector cannot be read by key, or an option is wrong.
    fn lookup(&self, table: &TableDef) -> Result<Arc<dyn LookupTableFactory>> {
        Err(SqlError::connector(
            &table.name,
            format!(
                "the {} connector cannot be read by key; a lookup join (FOR SYSTEM_TIME AS OF) reads a 'filesystem' or 'postgres' table",
                self.name()
            ),
        ))
    }

    fn sink(&self, table: &TableDef, _pipeline: &str) -> Result<SinkTable> {
        Err(SqlError::connector(
            &table.name,
            format!(
                "the {} connector only reads; it cannot be the target of INSERT INTO",
                self.name()
            ),
        ))
    }
}

/// The connectors a pipeline file can name.
pub struct ConnectorRegistry {
    connectors: BTreeMap<&'static str, Arc<dyn Connector>>,
}

impl Default for ConnectorRegistry {
    fn default() -> Self {
        let mut registry = Self {
            connectors: BTreeMap::new(),
        };
        registry.register(Arc::new(NexmarkConnector));
        registry.register(Arc::new(SequenceConnector));
        registry.register(Arc::new(FilesystemConnector));
        registry.register(Arc::new(StdoutConnector));
        registry.register(Arc::new(BlackholeConnector));
        registry.register(Arc::new(PostgresConnector));
        registry.register(Arc::new(PostgresCdcConnector));
        registry.register(Arc::new(KafkaConnector));
        registry.register(Arc::new(UpsertKafkaConnector));
        registry.register(Arc::new(IcebergConnector));
        registry
    }
}

impl ConnectorRegistry {
    /// Adds (or replaces) a connector.
    pub fn register(&mut self, connector: Arc<dyn Connector>) {
        self.connectors.insert(connector.name(), connector);
    }

    /// The registered connectors, by name.
    pub fn connectors(&self) -> impl Iterator<Item = &Arc<dyn Connector>> {
        self.connectors.values()
    }

    /// The connector `table` names, after checking its options.
    ///
    /// # Errors
    /// No or an unknown connector; an option the connector does not accept.
    pub fn connector_for(&self, table: &TableDef) -> Result<&dyn Connector> {
        let name = table.connector()?;
        let connector = self.connectors.get(name).ok_or_else(|| {
            SqlError::connector(
                &table.name,
                format!(
                    "unknown connector '{name}'; riffle has: {}",
                    self.connectors
                        .keys()
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })?;
        let accepted = connector.options();
        for key in table.options.keys() {
            // A name ending in `*` accepts every key with that prefix.
            let known = accepted.iter().any(|o| match o.name.strip_suffix('*') {
                Some(prefix) => key.starts_with(prefix) && key.len() > prefix.len(),
                None => o.name == key,
            });
            if key != "connector" && !known {
                let valid: Vec<String> = accepted
                    .iter()
                    .map(|o| format!("'{}' ({})", o.name, o.help))
                    .collect();
                return Err(SqlError::connector(
                    &table.name,
                    format!(
                        "the {name} connector has no option '{key}'; valid options: {}",
                        if valid.is_empty() {
                            "none".to_string()
                        } else {
                            valid.join(", ")
                        }
                    ),
                ));
            }
        }
        Ok(connector.as_ref())
    }
}

/// A required option's value.
pub(crate) fn required<'a>(table: &'a TableDef, key: &str, example: &str) -> Result<&'a str> {
    table.options.get(key).map(String::as_str).ok_or_else(|| {
        SqlError::connector(
            &table.name,
            format!("option '{key}' is required, e.g. '{key}' = '{example}'"),
        )
    })
}

/// An option that takes one of `choices` (lower case), or `default` when absent.
pub(crate) fn choice_option(
    table: &TableDef,
    key: &str,
    choices: &[&'static str],
    default: &'static str,
) -> Result<&'static str> {
    let Some(value) = table.options.get(key) else {
        return Ok(default);
    };
    let lower = value.to_ascii_lowercase();
    choices
        .iter()
        .find(|c| **c == lower)
        .copied()
        .ok_or_else(|| {
            SqlError::connector(
                &table.name,
                format!("'{key}' = '{value}': use {}", choices.join(" or ")),
            )
        })
}

/// The `WATERMARK` of a source table that reads event time from its records (`what`
/// names it in the error: "a file source").
pub(crate) fn required_watermark(table: &TableDef, what: &str) -> Result<Watermark> {
    table.watermark.clone().ok_or_else(|| {
        SqlError::connector(
            &table.name,
            format!("{what} needs its event-time column: add WATERMARK FOR ts AS ts - INTERVAL '5' SECOND to the column list"),
        )
    })
}

/// `'on_malformed'` of a source reading external records: `fail` (default) or `skip`.
pub(crate) fn malformed_option(table: &TableDef) -> Result<MalformedRecords> {
    Ok(
        match choice_option(table, "on_malformed", &["fail", "skip"], "fail")? {
            "skip" => MalformedRecords::Skip,
            _ => MalformedRecords::Fail,
        },
    )
}

/// The value of the environment variable option `key` names (a password), if given.
/// The value itself never appears in messages, plans or checkpoints.
pub(crate) fn secret_from_env(table: &TableDef, key: &str) -> Result<Option<String>> {
    let Some(variable) = table.options.get(key) else {
        return Ok(None);
    };
    std::env::var(variable).map(Some).map_err(|_| {
        SqlError::connector(
            &table.name,
            format!("'{key}' names the environment variable `{variable}`, which is not set; export it before running"),
        )
    })
}

/// A duration option such as `5s`, `500 ms` or `1 minute`; `none` turns it off.
/// Absent: `default`.
pub(crate) fn duration_option(
    table: &TableDef,
    key: &str,
    default: Option<Duration>,
) -> Result<Option<Duration>> {
    let Some(text) = table.options.get(key) else {
        return Ok(default);
    };
    let t = text.trim();
    if t.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    crate::ddl::parse_duration(number, unit.trim())
        .filter(|d| !d.is_zero())
        .map(Some)
        .ok_or_else(|| {
            SqlError::connector(
                &table.name,
                format!("option '{key}' = '{text}' is not a duration such as 5s, 500ms or 1 minute (or none)"),
            )
        })
}

/// The declared columns of a lookup table (it is read by them, so they cannot be
/// inferred).
pub(crate) fn lookup_columns(table: &TableDef) -> Result<SchemaRef> {
    if table.columns.is_empty() {
        return Err(SqlError::connector(
            &table.name,
            "a lookup table needs its columns declared: CREATE TABLE name (key BIGINT, `value` VARCHAR) WITH (…)",
        ));
    }
    Ok(Arc::new(Schema::new(table.columns.clone())))
}

/// Refuses the options of `keys` that `table` sets: they belong to another use of the
/// connector (`what` says which).
pub(crate) fn refuse_options(table: &TableDef, keys: &[&str], what: &str) -> Result<()> {
    match keys.iter().find(|k| table.options.contains_key(**k)) {
        Some(key) => Err(SqlError::connector(&table.name, format!("'{key}' {what}"))),
        None => Ok(()),
    }
}

/// An optional count option: `1000`, `10K`, `2.5M`, `1G`.
pub(crate) fn count_option(table: &TableDef, key: &str) -> Result<Option<u64>> {
    let Some(text) = table.options.get(key) else {
        return Ok(None);
    };
    parse_count(text).map(Some).ok_or_else(|| {
        SqlError::connector(
            &table.name,
            format!("option '{key}' = '{text}' is not a count such as 1000, 10K or 2.5M"),
        )
    })
}

/// An optional size in bytes: `4096`, `64kb`, `16 MB`, `1gb` (units of 1024, as
/// Flink's memory sizes).
pub(crate) fn bytes_option(table: &TableDef, key: &str) -> Result<Option<u64>> {
    let Some(text) = table.options.get(key) else {
        return Ok(None);
    };
    parse_bytes(text).map(Some).ok_or_else(|| {
        SqlError::connector(
            &table.name,
            format!("option '{key}' = '{text}' is not a size such as 4096, 64kb or 16mb"),
        )
    })
}

/// `4096`, `64kb`, `16 MB`, `1g`: a number and an optional unit (b, k/kb, m/mb, g/gb,
/// in units of 1024; case and a space between ignored). Not zero.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim().to_ascii_lowercase();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let number: u64 = t[..digits].parse().ok()?;
    let scale: u64 = match t[digits..].trim() {
        "" | "b" | "bytes" => 1,
        "k" | "kb" => 1 << 10,
        "m" | "mb" => 1 << 20,
        "g" | "gb" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(scale).filter(|&n| n > 0)
}

/// `1000`, `10K`, `2.5M`, `1G` (underscores allowed).
pub fn parse_count(text: &str) -> Option<u64> {
    let t = text.trim().replace('_', "");
    let (number, scale) = match t.chars().last()?.to_ascii_uppercase() {
        'K' => (&t[..t.len() - 1], 1e3),
        'M' => (&t[..t.len() - 1], 1e6),
        'G' | 'B' => (&t[..t.len() - 1], 1e9),
        _ => (t.as_str(), 1.0),
    };
    let n: f64 = number.parse().ok()?;
    (n.is_finite() && n >= 0.0).then_some((n * scale).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_with_suffixes() {
        assert_eq!(parse_count("1000"), Some(1000));
        assert_eq!(parse_count("10K"), Some(10_000));
        assert_eq!(parse_count("2.5M"), Some(2_500_000));
        assert_eq!(parse_count("1_000"), Some(1000));
        assert_eq!(parse_count("lots"), None);
    }

    #[test]
    fn sizes_in_bytes_with_units_of_1024() {
        assert_eq!(parse_bytes("4096"), Some(4096));
        assert_eq!(parse_bytes("64kb"), Some(64 << 10));
        assert_eq!(parse_bytes("16 MB"), Some(16 << 20));
        assert_eq!(parse_bytes("1g"), Some(1 << 30));
        for bad in ["", "0", "1.5mb", "12 parsecs", "-1"] {
            assert_eq!(parse_bytes(bad), None, "{bad}");
        }
    }
}
