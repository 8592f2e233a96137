//! `sequence`: a generated stream of numbered rows, the input of the peer benchmark
//! jobs that riffle and Flink both run (README, "Benchmarks").

use super::{count_option, Connector, OptionSpec, RunSettings, SourceTable};
use crate::ddl::TableDef;
use crate::error::{Result, SqlError};
use riffle_connectors::PeerSourceFactory;
use riffle_runtime::WatermarkStrategy;
use std::sync::Arc;
use std::time::Duration;

/// Default watermark delay, the peer jobs' 1 s.
pub const SEQUENCE_WATERMARK_DELAY: Duration = Duration::from_secs(1);

/// The columns a sequence table has, in order.
const COLUMNS: [&str; 4] = ["id", "k", "v", "ts"];

/// `id = 0..events`, `k = id % 1000`, `v = id % 97`, and event time `ts` at 100,000
/// rows per second of event time.
pub struct SequenceConnector;

const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "events",
        help: "how many rows, e.g. 100M (required, or --events)",
    },
    OptionSpec {
        name: "batch_rows",
        help: "rows per generated batch (default 8192)",
    },
];

impl Connector for SequenceConnector {
    fn name(&self) -> &'static str {
        "sequence"
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn source(&self, table: &TableDef, settings: &RunSettings) -> Result<SourceTable> {
        let events = settings
            .nexmark_events
            .or(count_option(table, "events")?)
            .ok_or_else(|| {
                SqlError::connector(
                    &table.name,
                    "a sequence table needs 'events' (e.g. 'events' = '10M') or --events",
                )
            })?;
        let batch_rows = count_option(table, "batch_rows")?.unwrap_or(8192);
        if batch_rows == 0 {
            return Err(SqlError::connector(
                &table.name,
                "'batch_rows' must be at least 1",
            ));
        }
        let declared: Vec<&str> = table.columns.iter().map(|f| f.name().as_str()).collect();
        if !declared.is_empty() && declared != COLUMNS {
            return Err(SqlError::connector(
                &table.name,
                format!(
                    "a sequence table has the columns ({}); declare exactly those or none",
                    COLUMNS.join(", ")
                ),
            ));
        }
        let delay = match &table.watermark {
            Some(w) if w.column != "ts" => {
                return Err(SqlError::connector(
                    &table.name,
                    format!(
                        "sequence event time is `ts`; write WATERMARK FOR ts AS ts - INTERVAL '1' SECOND (not `{}`)",
                        w.column
                    ),
                ))
            }
            Some(w) => w.delay,
            None => SEQUENCE_WATERMARK_DELAY,
        };
        Ok(SourceTable {
            factory: Arc::new(PeerSourceFactory::new(events, batch_rows).with_time_column()),
            event_time: "ts".into(),
            watermarks: WatermarkStrategy {
                max_out_of_orderness: delay,
                idle_timeout: None,
            },
            expected_rows: Some(events),
            sql_names: None,
            upsert_key: None,
        })
    }
}
