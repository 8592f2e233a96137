//! `nexmark`: the built-in benchmark generator, one table per event type.

use super::{count_option, Connector, OptionSpec, RunSettings, SourceTable};
use crate::ddl::TableDef;
use crate::error::{Result, SqlError};
use riffle_connectors::nexmark::{NexmarkConfig, NexmarkTable};
use riffle_connectors::NexmarkSourceFactory;
use riffle_runtime::WatermarkStrategy;
use std::sync::Arc;
use std::time::Duration;

/// Default watermark delay of Nexmark tables, as in the reference SQL.
pub const NEXMARK_WATERMARK_DELAY: Duration = Duration::from_secs(4);

/// Nexmark event streams.
pub struct NexmarkConnector;

const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "event_type",
        help: "bid, auction or person (required)",
    },
    OptionSpec {
        name: "events",
        help: "total events generated over all three types, e.g. 10M; unbounded if absent",
    },
    OptionSpec {
        name: "rate",
        help: "events per second of event time, default 10M",
    },
    OptionSpec {
        name: "out_of_order",
        help: "out-of-order group size, default 1 (in order)",
    },
    OptionSpec {
        name: "throttle",
        help: "at most this many events per second of wall time",
    },
    OptionSpec {
        name: "block_events",
        help: "events per generated block, the unit of batches and of splitting over subtasks (default 8192); the events are the same for any size",
    },
];

impl Connector for NexmarkConnector {
    fn name(&self) -> &'static str {
        "nexmark"
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn source(&self, table: &TableDef, settings: &RunSettings) -> Result<SourceTable> {
        let kind = super::required(table, "event_type", "bid")?;
        let kind = NexmarkTable::parse(kind).ok_or_else(|| {
            SqlError::connector(
                &table.name,
                format!("'event_type' = '{kind}': choose bid, auction or person"),
            )
        })?;
        let defaults = NexmarkConfig::default();
        let config = NexmarkConfig {
            events: settings.nexmark_events.or(count_option(table, "events")?),
            first_event_rate: count_option(table, "rate")?.unwrap_or(defaults.first_event_rate),
            out_of_order_group_size: count_option(table, "out_of_order")?.unwrap_or(1).max(1),
            max_events_per_second: settings
                .nexmark_throttle
                .or(count_option(table, "throttle")?),
            block_events: count_option(table, "block_events")?.unwrap_or(defaults.block_events),
            ..defaults
        };
        if config.first_event_rate == 0 || config.max_events_per_second == Some(0) {
            return Err(SqlError::connector(
                &table.name,
                "'rate' and 'throttle' must be at least 1 event per second",
            ));
        }
        if config.block_events == 0 {
            return Err(SqlError::connector(
                &table.name,
                "'block_events' must be at least 1",
            ));
        }
        let factory = NexmarkSourceFactory::new(kind, config.clone());
        let schema = kind.schema();
        let columns: Vec<&str> = schema
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .filter(|n| *n != riffle_core::TIMESTAMP_FIELD)
            .collect();
        // Flink's Nexmark tables name the same columns in camelCase (`dateTime`).
        let flink: Vec<String> = columns.iter().map(|c| camel_case(c)).collect();
        let declared: Vec<&str> = table.columns.iter().map(|f| f.name().as_str()).collect();
        let flink_names = !declared.is_empty() && declared == flink;
        if !declared.is_empty() && !flink_names && declared != columns {
            return Err(SqlError::connector(
                &table.name,
                format!(
                    "a nexmark {} table has the columns ({}), or with Flink's names ({}); declare exactly those or none",
                    kind.name(),
                    columns.join(", "),
                    flink.join(", ")
                ),
            ));
        }
        let event_time = if flink_names { "dateTime" } else { "date_time" };
        let delay = match &table.watermark {
            Some(w) if w.column != event_time => {
                return Err(SqlError::connector(
                    &table.name,
                    format!(
                        "nexmark event time is `{event_time}`; write WATERMARK FOR {event_time} AS {event_time} - INTERVAL '4' SECOND (not `{}`)",
                        w.column
                    ),
                ))
            }
            Some(w) => w.delay,
            None => NEXMARK_WATERMARK_DELAY,
        };
        Ok(SourceTable {
            factory: Arc::new(factory),
            event_time: "date_time".into(),
            watermarks: WatermarkStrategy {
                max_out_of_orderness: delay,
                idle_timeout: None,
            },
            expected_rows: config.events,
            sql_names: flink_names.then_some(flink),
            upsert_key: None,
        })
    }
}

/// `date_time` → `dateTime`: the name Flink's Nexmark tables give a column.
fn camel_case(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut upper = false;
    for c in snake.chars() {
        match c {
            '_' => upper = true,
            c if upper => {
                out.extend(c.to_uppercase());
                upper = false;
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::camel_case;

    #[test]
    fn flink_names_are_the_columns_in_camel_case() {
        assert_eq!(camel_case("date_time"), "dateTime");
        assert_eq!(camel_case("email_address"), "emailAddress");
        assert_eq!(camel_case("initial_bid"), "initialBid");
        assert_eq!(camel_case("price"), "price");
    }
}
