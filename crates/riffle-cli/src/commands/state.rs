//! `riffle state query "<SQL>"`: DataFusion SQL over a checkpoint's or savepoint's state.

use super::checkpointing::open_store;
use anyhow::{Context, Result};
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};
use riffle_core::arrow::util::pretty::pretty_format_batches;
use riffle_core::Epoch;
use riffle_state::recovery::EpochFinding;
use riffle_state::tables::load_state_tables;
use riffle_state::{Manifest, ManifestStatus};
use std::sync::Arc;

/// Arguments of `riffle state`.
#[derive(Debug, clap::Args)]
pub struct StateArgs {
    #[command(subcommand)]
    pub command: StateCommand,
}

/// What to do with state.
#[derive(Debug, clap::Subcommand)]
pub enum StateCommand {
    /// Run SQL over the state: one table per stateful operator, named by its id (rows
    /// of several kinds, as a window join's `left`/`right`, make `{id}_{kind}` tables).
    /// Delta rows that a later file replaced are left out: each table holds the state a
    /// restore would see. `SHOW TABLES` and `DESCRIBE {table}` list what is there.
    #[command(
        after_help = "Examples:\n  riffle state query \"SHOW TABLES\" --pipeline nexmark-q5\n  riffle state query \"SELECT auction, SUM(count__value) AS bids FROM q5_counts GROUP BY auction ORDER BY bids DESC LIMIT 10\" --pipeline nexmark-q5\n  riffle state query \"SELECT COUNT(*) FROM q5_counts\" --savepoint before-upgrade"
    )]
    Query {
        /// The SQL (DataFusion's dialect).
        sql: String,
        /// Query this checkpoint epoch (default: the newest committed one).
        #[arg(long, conflicts_with = "savepoint")]
        epoch: Option<u64>,
        /// Query this savepoint.
        #[arg(long)]
        savepoint: Option<String>,
        /// Where the state lives.
        #[arg(long, default_value = "./riffle-state")]
        state: String,
        /// The pipeline (`nexmark-q5` for `riffle nexmark --query q5`).
        #[arg(long, default_value = "nexmark-q5")]
        pipeline: String,
        /// Output: `table` (aligned text) or `csv`.
        #[arg(long, default_value = "table")]
        format: String,
    },
}

pub fn run(args: StateArgs) -> Result<()> {
    let StateCommand::Query {
        sql,
        epoch,
        savepoint,
        state,
        pipeline,
        format,
    } = args.command;
    anyhow::ensure!(
        format == "table" || format == "csv",
        "--format `{format}`: use table or csv"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let store = open_store(&state, &pipeline)?;
        let manifest = choose_manifest(&store, epoch, savepoint.as_deref(), &pipeline).await?;
        let tables = load_state_tables(&store, &manifest).await?;
        let ctx =
            SessionContext::new_with_config(SessionConfig::new().with_information_schema(true));
        let mut names = Vec::new();
        for table in tables {
            let schema = table.batch.schema();
            let mem = MemTable::try_new(schema, vec![vec![table.batch]])?;
            ctx.register_table(table.name.as_str(), Arc::new(mem))?;
            names.push(table.name);
        }
        // DataFusion's errors repeat their causes in their text: print them once.
        let frame = ctx.sql(&sql).await.map_err(|e| {
            anyhow::anyhow!("planning the query (tables: {}): {e}", names.join(", "))
        })?;
        let batches = frame
            .collect()
            .await
            .map_err(|e| anyhow::anyhow!("running the query: {e}"))?;
        if format == "csv" {
            let mut writer = riffle_core::arrow::csv::Writer::new(std::io::stdout());
            for batch in &batches {
                writer.write(batch)?;
            }
        } else {
            println!("{}", pretty_format_batches(&batches)?);
        }
        Ok(())
    })
}

/// The manifest `--epoch`/`--savepoint` names, or the newest committed checkpoint.
async fn choose_manifest(
    store: &riffle_state::CheckpointStore,
    epoch: Option<u64>,
    savepoint: Option<&str>,
    pipeline: &str,
) -> Result<Manifest> {
    if let Some(label) = savepoint {
        return store.read_savepoint(label).await?.with_context(|| {
            format!(
                "no savepoint `{label}` of `{pipeline}`; `riffle savepoint list` shows what exists"
            )
        });
    }
    if let Some(epoch) = epoch {
        return store.read_manifest(Epoch(epoch)).await?.with_context(|| {
            format!("epoch {epoch} of `{pipeline}` has no manifest; `riffle checkpoints list` shows what exists")
        });
    }
    let findings = store.findings(false).await?;
    findings
        .into_iter()
        .rev()
        .find_map(|(_, f)| match f {
            EpochFinding::Valid(m) if m.status == ManifestStatus::Committed => Some(m),
            _ => None,
        })
        .with_context(|| {
            format!("`{pipeline}` has no committed checkpoint; pass --savepoint or --epoch")
        })
}
