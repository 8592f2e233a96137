//! `riffle run pipeline.sql` and `riffle explain pipeline.sql`.

use super::checkpointing::CheckpointArgs;
use crate::units::parse_count;
use anyhow::{Context, Result};
use riffle_runtime::PhysicalPlan;
use riffle_sql::{plan_pipeline, ConnectorRegistry, PlanOptions, RunSettings, SqlPipeline};
use std::path::{Path, PathBuf};

/// How a SQL pipeline is planned: the file and the settings that shape its dataflow.
#[derive(Debug, Clone, clap::Args)]
pub struct SqlArgs {
    /// The pipeline file: CREATE TABLE … WITH ('connector' = …), optional CREATE VIEW,
    /// and one or more INSERT INTO … SELECT … run together as one job (docs/sql.md).
    pub file: PathBuf,
    /// Subtasks of sources and keyed operators. A run restored from a savepoint or
    /// checkpoint may use another parallelism than the state was taken at.
    #[arg(long, short, default_value_t = 2)]
    pub parallelism: usize,
    /// Key groups: the most subtasks a keyed operator can ever have.
    #[arg(long, default_value_t = riffle_core::DEFAULT_MAX_PARALLELISM)]
    pub max_parallelism: u16,
    /// Override the 'events' option of every nexmark table, e.g. 10M.
    #[arg(long, short, value_parser = parse_count)]
    pub events: Option<u64>,
    /// Override the 'throttle' option of every nexmark table (events per wall second).
    #[arg(long, value_parser = parse_count)]
    pub throttle: Option<u64>,
}

impl SqlArgs {
    /// Reads and plans the file.
    ///
    /// # Errors
    /// An unreadable file; syntax, planning and connector errors, prefixed with the file.
    pub fn plan(&self) -> Result<SqlPipeline> {
        check_parallelism(self.parallelism, self.max_parallelism)?;
        let text = std::fs::read_to_string(&self.file)
            .with_context(|| format!("reading {}", self.file.display()))?;
        let options = PlanOptions {
            name: pipeline_name(&self.file),
            parallelism: self.parallelism,
            max_parallelism: self.max_parallelism,
            settings: RunSettings {
                nexmark_events: self.events,
                nexmark_throttle: self.throttle,
            },
        };
        plan_pipeline(&text, &options, &ConnectorRegistry::default())
            .map_err(|e| anyhow::anyhow!("{}: {e}", self.file.display()))
    }
}

/// The pipeline's name: the file name without `.sql` (its state lives under it).
pub fn pipeline_name(file: &Path) -> String {
    file.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "pipeline".into())
}

/// Arguments of `riffle run`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  riffle run examples/nexmark/q5.sql --events 10M\n  riffle run examples/nexmark/q1.sql --events 20          # q1 prints to stdout\n  riffle run examples/nexmark/q7.sql --events 40M --checkpoint-interval 1s   # exactly-once; kill it and run it again\n  riffle run pipeline.sql --checkpoint-interval 1s --from-savepoint sp-000012 --parallelism 4\n  riffle explain examples/nexmark/q5.sql"
)]
pub struct RunArgs {
    /// The file and how to plan it.
    #[command(flatten)]
    pub sql: SqlArgs,
    /// Print the dataflow plan (tasks, exchanges, state) and exit.
    #[arg(long)]
    pub explain: bool,
    /// Draw the progress line even when stderr is not a terminal.
    #[arg(long)]
    pub progress: bool,
    /// Run the job as this many worker processes on this machine (`riffle worker`
    /// each; docs/cluster.md). Needs checkpoints; a worker that fails restarts them all.
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Checkpoints, state root and restarts.
    #[command(flatten)]
    pub checkpoints: CheckpointArgs,
}

/// Arguments of `riffle explain`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  riffle explain examples/nexmark/q5.sql --parallelism 4")]
pub struct ExplainArgs {
    /// The file and how to plan it.
    #[command(flatten)]
    pub sql: SqlArgs,
}

pub fn run(args: RunArgs) -> Result<()> {
    super::execute::check_restore_options(&args.checkpoints)?;
    let pipeline = args.sql.plan()?;
    if args.explain {
        return explain_pipeline(&pipeline);
    }
    if let Some(workers) = args.workers.filter(|&n| n > 1) {
        anyhow::ensure!(
            args.checkpoints.enabled(),
            "--workers needs checkpoints: add --checkpoint-interval (e.g. 1s)"
        );
        anyhow::ensure!(
            args.checkpoints.http_address.is_none(),
            "--http-address with --workers: the workers do not serve the control endpoint yet"
        );
        let restart = args.checkpoints.restart_strategy()?;
        let store =
            super::checkpointing::open_store(&args.checkpoints.state, &pipeline.graph.name)?;
        return super::launcher::launch(workers, restart, &store, args.progress);
    }
    let label = args
        .sql
        .file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    eprintln!(
        "riffle: running {label} at parallelism {} (writes {}; planned in {:.1} ms)",
        args.sql.parallelism,
        pipeline.sinks.join(", "),
        pipeline.planning_time.as_secs_f64() * 1e3
    );
    super::execute::run(super::execute::Job {
        label: &label,
        graph: &pipeline.graph,
        events: pipeline.expected_rows,
        checkpoints: &args.checkpoints,
        progress: args.progress,
    })
}

pub fn explain(args: ExplainArgs) -> Result<()> {
    explain_pipeline(&args.sql.plan()?)
}

fn explain_pipeline(pipeline: &SqlPipeline) -> Result<()> {
    print!(
        "{}",
        PhysicalPlan::compile(&pipeline.graph).explain(&pipeline.graph)
    );
    println!(
        "planned in {:.1} ms",
        pipeline.planning_time.as_secs_f64() * 1e3
    );
    Ok(())
}

/// `--parallelism` is at least 1 and at most `--max-parallelism`.
///
/// # Errors
/// Either bound is broken.
pub fn check_parallelism(parallelism: usize, max_parallelism: u16) -> Result<()> {
    anyhow::ensure!(parallelism >= 1, "--parallelism must be at least 1");
    anyhow::ensure!(
        parallelism <= usize::from(max_parallelism),
        "--parallelism {parallelism} exceeds --max-parallelism {max_parallelism}"
    );
    Ok(())
}
