//! `riffle nexmark`: run one query with progress and a summary.

use crate::progress::ProgressLine;
use anyhow::{Context, Result};
use riffle_bench::resources::{cpu_time, peak_rss_bytes};
use riffle_connectors::sinks::{
    BlackholeSinkFactory, FileFormat, FileSinkFactory, RollingPolicy, StdoutFormat,
    StdoutSinkFactory,
};
use riffle_core::SinkFactory;
use riffle_runtime::job::{self, JobConfig};
use riffle_runtime::PhysicalPlan;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

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
    let restore = &args.checkpoints;
    anyhow::ensure!(
        restore.enabled()
            || (restore.from_savepoint.is_none()
                && restore.from_checkpoint.is_none()
                && !restore.allow_non_restored_state),
        "--from-savepoint and --from-checkpoint need checkpoints on: add --checkpoint-interval (e.g. 1s)"
    );
    let sink = output_sink(&args.output, &args.format)?;
    let graph = args.pipeline.build(sink)?;
    let (events, parallelism) = (args.pipeline.events, args.pipeline.parallelism);
    if args.explain {
        print!("{}", PhysicalPlan::compile(&graph).explain(&graph));
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    eprintln!(
        "riffle: running nexmark {query} over {} events at parallelism {} (output: {})",
        events, parallelism, args.output
    );
    let started = Instant::now();
    let cpu0 = cpu_time();
    let mut stopped = false;
    let (summary, reports) = if args.checkpoints.enabled() {
        let outcome = super::checkpointing::run(
            &runtime,
            &graph,
            &args.checkpoints,
            Some(events),
            args.progress,
        )
        .with_context(|| format!("nexmark {query} failed"))?;
        if outcome.restarts > 0 {
            eprintln!("riffle: finished after {} restart(s)", outcome.restarts);
        }
        if let Some(result) = &outcome.stopped {
            stopped = true;
            super::checkpointing::print_stopped(result, &args.checkpoints.state);
        }
        (outcome.summary, outcome.reports)
    } else {
        let summary = runtime
            .block_on(async {
                let handle = job::start(&graph, &JobConfig::default(), false)?;
                let progress =
                    ProgressLine::start(handle.metrics.clone(), Some(events), args.progress, None);
                let result = handle.wait().await;
                drop(progress);
                result
            })
            .with_context(|| format!("nexmark {query} failed"))?;
        (summary, Vec::new())
    };
    let seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_time().saturating_sub(cpu0).as_secs_f64();
    eprintln!("riffle: {query} finished in {seconds:.2}s");
    // A run stopped with a savepoint generated only part of its events.
    let events = if stopped { summary.source_rows } else { events };
    eprintln!(
        "  events           {} {}({:.2} M events/s, {:.2} M events per CPU-second)",
        events,
        if stopped {
            "rows read before the stop "
        } else {
            ""
        },
        events as f64 / seconds / 1e6,
        events as f64 / cpu.max(1e-9) / 1e6
    );
    eprintln!(
        "  rows in / out    {} / {}",
        summary.source_rows, summary.sink_rows
    );
    eprintln!("  late rows dropped {}", summary.late_rows_dropped());
    for op in summary
        .operators
        .iter()
        .filter(|o| o.late_rows_dropped > 0 || o.windows_emitted > 0)
    {
        eprintln!(
            "    {:<20} windows emitted {:>8}, late rows dropped {}",
            op.operator.0, op.windows_emitted, op.late_rows_dropped
        );
    }
    if let Some(report) = reports.last() {
        super::checkpointing::print_report(report);
    }
    if let Some(peak) = peak_rss_bytes() {
        eprintln!(
            "  peak memory      {:.0} MiB",
            peak as f64 / (1024.0 * 1024.0)
        );
    }
    let files: Vec<_> = summary
        .sinks
        .iter()
        .flat_map(|(_, s)| s.files.iter())
        .collect();
    if !files.is_empty() {
        eprintln!("  files written    {}", files.len());
        for f in files.iter().take(5) {
            eprintln!("    {}", f.display());
        }
    }
    Ok(())
}
