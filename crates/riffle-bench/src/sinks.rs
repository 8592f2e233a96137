//! `riffle bench --sinks`: Nexmark q0 — every bid, five columns — written with
//! checkpoints into the filesystem Parquet sink and into Iceberg tables (SQLite catalog,
//! local warehouse), to see what a table costs against plain files. The Iceberg
//! variants plan only in a binary built with the `iceberg` feature; elsewhere planning
//! them says so.

use crate::error::BenchError;
use riffle_runtime::JobGraph;
use riffle_sql::{plan_pipeline, ConnectorRegistry, PlanOptions, RunSettings};
use std::path::Path;
use std::time::Duration;

/// One sink the comparison writes into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkVariant {
    /// The filesystem sink, Parquet (uncompressed pages): the baseline.
    ParquetFiles,
    /// An Iceberg table with the defaults (Snappy pages, a snapshot per checkpoint).
    Iceberg,
    /// An Iceberg table with Zstandard pages.
    IcebergZstd,
    /// An Iceberg table with LZ4_RAW pages.
    IcebergLz4,
    /// An Iceberg table with uncompressed pages, as the file sink writes them.
    IcebergUncompressed,
    /// An Iceberg table partitioned by `bucket(8, auction)`.
    IcebergPartitioned,
    /// An Iceberg table with one snapshot per ten checkpoints.
    IcebergTenEpochsPerCommit,
}

impl SinkVariant {
    /// Every variant, the baseline first.
    pub const ALL: [SinkVariant; 7] = [
        SinkVariant::ParquetFiles,
        SinkVariant::Iceberg,
        SinkVariant::IcebergZstd,
        SinkVariant::IcebergLz4,
        SinkVariant::IcebergUncompressed,
        SinkVariant::IcebergPartitioned,
        SinkVariant::IcebergTenEpochsPerCommit,
    ];

    /// How the table names it.
    pub fn label(self) -> &'static str {
        match self {
            SinkVariant::ParquetFiles => "filesystem, Parquet (uncompressed)",
            SinkVariant::Iceberg => "Iceberg, Snappy (the default)",
            SinkVariant::IcebergZstd => "Iceberg, 'compression' = 'zstd'",
            SinkVariant::IcebergLz4 => "Iceberg, 'compression' = 'lz4'",
            SinkVariant::IcebergUncompressed => "Iceberg, 'compression' = 'uncompressed'",
            SinkVariant::IcebergPartitioned => "Iceberg, PARTITIONED BY (bucket(8, auction))",
            SinkVariant::IcebergTenEpochsPerCommit => "Iceberg, 'epochs-per-commit' = '10'",
        }
    }

    /// A short name for its table and files.
    fn slug(self) -> &'static str {
        match self {
            SinkVariant::ParquetFiles => "files",
            SinkVariant::Iceberg => "snappy",
            SinkVariant::IcebergZstd => "zstd",
            SinkVariant::IcebergLz4 => "lz4",
            SinkVariant::IcebergUncompressed => "uncompressed",
            SinkVariant::IcebergPartitioned => "partitioned",
            SinkVariant::IcebergTenEpochsPerCommit => "grouped",
        }
    }

    /// The sink table's declaration, writing under `dir` (run `run`'s table: each run
    /// of each variant writes its own).
    fn sink_table(self, dir: &Path, run: usize) -> String {
        const COLUMNS: &str =
            "auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP, extra VARCHAR";
        let dir = dir.display();
        let slug = self.slug();
        let iceberg = |partitioned: &str, options: &str| {
            format!(
                "CREATE TABLE q0 ({COLUMNS}) {partitioned} WITH ('connector' = 'iceberg',
  'catalog.uri' = 'sqlite://{dir}/catalog.db', 'warehouse' = 'file://{dir}/warehouse',
  'table' = 'bench.{slug}_{run}', 'create' = 'true'{options});"
            )
        };
        match self {
            SinkVariant::ParquetFiles => format!(
                "CREATE TABLE q0 ({COLUMNS}) WITH ('connector' = 'filesystem',
  'path' = '{dir}/{slug}-{run}', 'format' = 'parquet');"
            ),
            SinkVariant::Iceberg => iceberg("", ""),
            SinkVariant::IcebergZstd => iceberg("", ", 'compression' = 'zstd'"),
            SinkVariant::IcebergLz4 => iceberg("", ", 'compression' = 'lz4'"),
            SinkVariant::IcebergUncompressed => iceberg("", ", 'compression' = 'uncompressed'"),
            SinkVariant::IcebergPartitioned => iceberg("PARTITIONED BY (bucket(8, auction))", ""),
            SinkVariant::IcebergTenEpochsPerCommit => iceberg("", ", 'epochs-per-commit' = '10'"),
        }
    }
}

/// The pipeline of `variant`: `events` bids' events through q0 into the sink under
/// `dir`.
pub fn pipeline_text(variant: SinkVariant, dir: &Path, run: usize, events: u64) -> String {
    format!(
        "CREATE TABLE bid (WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
  WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '{events}');
{}
INSERT INTO q0 SELECT auction, bidder, price, date_time, extra FROM bid;
",
        variant.sink_table(dir, run)
    )
}

/// Plans [`pipeline_text`] at `parallelism`.
///
/// # Errors
/// The pipeline does not plan (an Iceberg variant in a build without the feature).
pub fn plan(
    variant: SinkVariant,
    dir: &Path,
    run: usize,
    events: u64,
    parallelism: usize,
) -> Result<JobGraph, BenchError> {
    let options = PlanOptions {
        name: format!("sinks-q0-{run}"),
        parallelism,
        max_parallelism: riffle_core::DEFAULT_MAX_PARALLELISM,
        settings: RunSettings {
            nexmark_events: Some(events),
            nexmark_throttle: None,
        },
    };
    plan_pipeline(
        &pipeline_text(variant, dir, run, events),
        &options,
        &ConnectorRegistry::default(),
    )
    .map(|p| p.graph)
    .map_err(|e| BenchError::Sql(format!("{}: {e}", variant.label())))
}

/// One measured run of a variant.
#[derive(Debug, Clone, Copy)]
pub struct SinkRun {
    /// Rows the sink received per wall second.
    pub rows_per_second: f64,
    /// The median commit step of its periodic checkpoints (PREPARED through GC,
    /// the sink's publication included).
    pub commit: Duration,
}

/// The comparison as a Markdown table: per variant the median rows/s, its ratio to
/// the first variant's, and the median commit step per checkpoint.
pub fn table(runs: &[(SinkVariant, Vec<SinkRun>)], header: &str) -> String {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let rate = |r: &[SinkRun]| median(r.iter().map(|r| r.rows_per_second).collect());
    let base = runs.first().map_or(0.0, |(_, r)| rate(r));
    let mut out = format!(
        "| sink ({header}) | rows/s | vs the first | commit step per checkpoint |\n|---|---|---|---|\n"
    );
    for (variant, r) in runs {
        let commit = median(r.iter().map(|r| r.commit.as_secs_f64() * 1e3).collect());
        out.push_str(&format!(
            "| {} | {} | {:.2} | {commit:.1} ms |\n",
            variant.label(),
            crate::harness::human(rate(r)),
            rate(r) / base.max(1e-9),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_writes_under_its_directory_and_reads_the_same_bids() {
        let dir = Path::new("/tmp/x");
        for variant in SinkVariant::ALL {
            let text = pipeline_text(variant, dir, 2, 1000);
            assert!(text.contains("/tmp/x/"), "{text}");
            assert!(text.contains("'events' = '1000'"), "{text}");
            assert!(text.contains("INSERT INTO q0 SELECT auction"), "{text}");
        }
        assert!(pipeline_text(SinkVariant::IcebergPartitioned, dir, 0, 1)
            .contains("PARTITIONED BY (bucket(8, auction))"));
        // No two variants' runs write one table: a table belongs to one pipeline.
        let tables: std::collections::BTreeSet<String> = SinkVariant::ALL
            .iter()
            .filter_map(|v| {
                let text = v.sink_table(dir, 0);
                let at = text.find("'table' = ")?;
                Some(text[at..].split(',').next()?.to_string())
            })
            .collect();
        assert_eq!(tables.len(), SinkVariant::ALL.len() - 1, "{tables:?}");
    }

    #[test]
    fn the_table_gives_each_variant_its_ratio_to_the_first() {
        let run = |rows_per_second, ms| SinkRun {
            rows_per_second,
            commit: Duration::from_millis(ms),
        };
        let text = table(
            &[
                (
                    SinkVariant::ParquetFiles,
                    vec![run(4e6, 2), run(2e6, 3), run(3e6, 4)],
                ),
                (SinkVariant::Iceberg, vec![run(1.5e6, 10)]),
            ],
            "q0",
        );
        assert!(
            text.contains("| filesystem, Parquet (uncompressed) | 3.00 M | 1.00 | 3.0 ms |"),
            "{text}"
        );
        assert!(
            text.contains("| Iceberg, Snappy (the default) | 1.50 M | 0.50 | 10.0 ms |"),
            "{text}"
        );
    }
}
