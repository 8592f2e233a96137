//! `riffle nexmark`: run one query with progress and a summary.

use anyhow::Result;
use riffle_connectors::sinks::{
    BlackholeSinkFactory, FileFormat, FileSinkFactory, RollingPolicy, StdoutFormat,
    StdoutSinkFactory,
};
use riffle_core::SinkFactory;
use riffle_runtime::PhysicalPlan;
use std::path::PathBuf;
use std::sync::Arc;

/// Arguments of `riffle nexmark`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  riffle nexmark --query q5 --events 10M --parallelism 2\n  riffle nexmark --query q7 --events 1M --output out/q7 --format parquet\n  riffle nexmark --query q1 --events 20 --output stdout\n  riffle nexmark --query q5 --events 40M --rate 100K --checkpoint-interval 1s --output out/q5   # exactly-once; kill it and run it again\n  RIFFLE_CRASH_AT=after-manifest-prepared:3 riffle nexmark … --checkpoint-interval 1s   # crash at a protocol step (testing)\n  riffle nexmark --query q5 --events 100M --throttle 1M --checkpoint-interval 1s   # Ctrl-C stops it with a savepoint\n  riffle nexmark --query q5 --events 100M --checkpoint-interval 1s --from-savepoint sp-000012 --parallelism 4"
)]
pub struct NexmarkArgs {
    /// The query and its generator settings.
    #[command(flatten)]
    pub pipeline: super::pipeline::QueryArgs,
    /// Where rows go: `blackhole` (count only), `stdout`, or a directory (`out/q5` or
    /// `file:///abs/dir`).
    #[arg(long, short, default_value = "blackhole")]
    pub output: String,
    /// Format: jsonl, csv or parquet for a directory; jsonl or pretty (tables) for stdout.
    #[arg(long, default_value = "jsonl")]
    pub format: String,
    /// Print the dataflow plan (tasks, exchanges, state) and exit.
    #[arg(long)]
    pub explain: bool,
    /// Draw the progress line even when stderr is not a terminal.
    #[arg(long)]
    pub progress: bool,
    /// Checkpoints, state root and restarts.
    #[command(flatten)]
    pub checkpoints: super::checkpointing::CheckpointArgs,
}

/// Builds the sink an `--output` value names.
pub fn output_sink(output: &str, format: &str) -> Result<Arc<dyn SinkFactory>> {
    Ok(match output {
        "blackhole" => Arc::new(BlackholeSinkFactory),
        "stdout" if format == "pretty" => Arc::new(StdoutSinkFactory::new(StdoutFormat::Pretty)),
        "stdout" => Arc::new(StdoutSinkFactory::new(StdoutFormat::Jsonl)),
        dir => {
            let path = PathBuf::from(dir.strip_prefix("file://").unwrap_or(dir));
            let format = FileFormat::parse(format)?;
            Arc::new(FileSinkFactory::new(path, format, RollingPolicy::default()))
        }
    })
}

pub fn run(args: NexmarkArgs) -> Result<()> {
    let query = args.pipeline.query()?;
    super::execute::check_restore_options(&args.checkpoints)?;
    let sink = output_sink(&args.output, &args.format)?;
    let graph = args.pipeline.build(sink)?;
    let (events, parallelism) = (args.pipeline.events, args.pipeline.parallelism);
    if args.explain {
        print!("{}", PhysicalPlan::compile(&graph).explain(&graph));
        return Ok(());
    }
    eprintln!(
        "riffle: running nexmark {query} over {} events at parallelism {} (output: {})",
        events, parallelism, args.output
    );
    super::execute::run(super::execute::Job {
        label: &query.to_string(),
        graph: &graph,
        events: Some(events),
        checkpoints: &args.checkpoints,
        progress: args.progress,
    })
}
