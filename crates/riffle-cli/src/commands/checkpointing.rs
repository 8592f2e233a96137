//! Checkpoint options shared by the commands that run pipelines, and running a pipeline
//! with them: recovery messages, restarts, and the checkpoint statistics.

use crate::progress::{CheckpointStatus, ProgressLine};
use crate::units::{event_time, parse_duration};
use anyhow::{Context, Result};
use riffle_bench::harness::percentile_ms;
use riffle_core::arrow::util::display::array_value_to_string;
use riffle_core::state::KEY_GROUP_FIELD;
use riffle_core::OperatorId;
use riffle_runtime::recovery::Recovered;
use riffle_runtime::{
    CheckpointConfig, CheckpointReport, CheckpointedOutcome, CheckpointedRun, JobGraph, JobMetrics,
    RestartStrategy, RestoredJob, RunObserver, RuntimeError,
};
use riffle_state::{CheckpointStore, StateRoot};
use std::sync::Arc;
use std::time::Duration;

/// `--checkpoint-interval`, `--state` and the other checkpoint and restart options.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckpointArgs {
    /// Take a checkpoint this often (e.g. 1s); 0 disables checkpoints. With checkpoints
    /// on, output to files is exactly-once and a run resumes from the newest checkpoint
    /// of the same pipeline in `--state`.
    #[arg(long, default_value = "0", value_parser = parse_duration)]
    pub checkpoint_interval: Duration,
    /// Where checkpoints live: a directory, file:///abs/dir, s3://bucket/prefix or memory://.
    #[arg(long, default_value = "./riffle-state")]
    pub state: String,
    /// Start from empty state even if checkpoints exist (they are kept).
    #[arg(long)]
    pub no_restore: bool,
    /// Least time from one checkpoint's completion to the next one's start.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub checkpoint_min_pause: Duration,
    /// A checkpoint not complete after this long is abandoned.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub checkpoint_timeout: Duration,
    /// Failed checkpoints in a row the job tolerates before it fails.
    #[arg(long, default_value_t = 3)]
    pub tolerable_failed_checkpoints: usize,
    /// Committed checkpoints to keep (older ones are deleted).
    #[arg(long, default_value_t = 3)]
    pub retain_checkpoints: usize,
    /// After a failure, restart from the newest checkpoint: `fixed` (every
    /// --restart-delay), `exponential` (doubling from --restart-delay up to 1 minute) or
    /// `none`.
    #[arg(long, default_value = "fixed")]
    pub restart: String,
    /// Restarts allowed before the run fails.
    #[arg(long, default_value_t = 3)]
    pub restart_attempts: u32,
    /// Wait before a restart (the first one, for `exponential`).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub restart_delay: Duration,
}

impl CheckpointArgs {
    /// Whether checkpoints are on.
    pub fn enabled(&self) -> bool {
        !self.checkpoint_interval.is_zero()
    }

    fn restart_strategy(&self) -> Result<RestartStrategy> {
        Ok(match self.restart.as_str() {
            "none" => RestartStrategy::None,
            "fixed" => RestartStrategy::FixedDelay {
                attempts: self.restart_attempts,
                delay: self.restart_delay,
            },
            "exponential" => RestartStrategy::ExponentialBackoff {
                attempts: self.restart_attempts,
                initial: self.restart_delay,
                max: Duration::from_secs(60),
            },
            other => anyhow::bail!(
                "--restart `{other}` is not a restart strategy; use fixed, exponential or none"
            ),
        })
    }
}

/// Prints what recovery chose, draws the progress line of each attempt, and reports
/// failures and restarts.
struct CliObserver {
    pipeline: String,
    sources: Vec<String>,
    state: String,
    total_events: Option<u64>,
    force_progress: bool,
    progress: Option<ProgressLine>,
    status: Arc<CheckpointStatus>,
}

impl RunObserver for CliObserver {
    fn recovered(&mut self, recovered: &Recovered) {
        for (epoch, reason) in &recovered.plan.skipped {
            eprintln!("riffle: skipping damaged checkpoint epoch {epoch}: {reason}");
        }
        if !recovered.plan.skipped.is_empty() && recovered.manifest.is_some() {
            eprintln!(
                "riffle: output committed by the skipped epochs may be written again by the replay"
            );
        }
        if !recovered.plan.partial.is_empty() {
            let epochs: Vec<u64> = recovered.plan.partial.iter().map(|e| e.0).collect();
            eprintln!("riffle: swept incomplete epoch(s) without a manifest: {epochs:?}");
        }
        if recovered.recommitted > 0 {
            eprintln!(
                "riffle: rolled PREPARED epoch forward: re-committed {} sink transaction(s)",
                recovered.recommitted
            );
        }
        if recovered.aborted > 0 {
            eprintln!(
                "riffle: discarded {} staged output file(s) of uncommitted epochs",
                recovered.aborted
            );
        }
        match &recovered.manifest {
            Some(m) => {
                let offsets = recovered
                    .restored
                    .as_deref()
                    .map(|r| source_offsets(r, &self.sources))
                    .unwrap_or_default();
                let watermark = m.watermark.map_or("none".to_string(), event_time);
                if m.watermark == Some(i64::MAX) {
                    eprintln!(
                        "riffle: `{}` already ran to the end of its input (checkpoint epoch {}); nothing is left to do. To compute it again: --no-restore (and clear the output first)",
                        self.pipeline, m.epoch
                    );
                }
                eprintln!(
                    "riffle: resuming `{}` from checkpoint epoch {} (generation {}), watermark {watermark}; source offsets: {}",
                    self.pipeline,
                    m.epoch,
                    recovered.generation,
                    offsets.join("; ")
                );
            }
            None => eprintln!(
                "riffle: no checkpoint of `{}` in {}; starting from empty state",
                self.pipeline, self.state
            ),
        }
    }

    fn started(&mut self, metrics: &Arc<JobMetrics>) {
        self.progress = Some(ProgressLine::start(
            metrics.clone(),
            self.total_events,
            self.force_progress,
            Some(self.status.clone()),
        ));
    }

    fn failed(&mut self, error: &RuntimeError, restart: Option<(u32, Duration)>) {
        self.progress = None;
        match restart {
            Some((n, delay)) => eprintln!(
                "riffle: job failed: {error}\nriffle: restart {n} from the newest checkpoint in {delay:?}"
            ),
            None => eprintln!("riffle: job failed: {error}"),
        }
    }
}

/// Each source subtask's restored position, e.g. `bids[0] next_event=120000`.
fn source_offsets(restored: &RestoredJob, sources: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for id in sources {
        let Some(op) = restored.operators.get(&OperatorId(id.clone())) else {
            continue;
        };
        let mut subtasks: Vec<_> = op.subtasks.iter().collect();
        subtasks.sort_by_key(|(s, _)| **s);
        for (subtask, state) in subtasks {
            let mut fields = Vec::new();
            for batch in &state.batches {
                for (i, field) in batch.schema().fields().iter().enumerate() {
                    if field.name() == KEY_GROUP_FIELD || batch.num_rows() == 0 {
                        continue;
                    }
                    let value = array_value_to_string(batch.column(i), 0).unwrap_or_default();
                    fields.push(format!("{}={value}", field.name()));
                }
            }
            out.push(format!("{id}[{subtask}] {}", fields.join(" ")));
        }
    }
    out
}

/// Runs `graph` with checkpoints as `args` say, restarting after failures.
pub fn run(
    runtime: &tokio::runtime::Runtime,
    graph: &JobGraph,
    args: &CheckpointArgs,
    total_events: Option<u64>,
    force_progress: bool,
) -> Result<CheckpointedOutcome> {
    let root = StateRoot::parse(&args.state)
        .with_context(|| format!("opening the state root `{}`", args.state))?;
    let store = CheckpointStore::new(root, &graph.name);
    if args.no_restore {
        eprintln!(
            "riffle: --no-restore: starting from empty state (existing checkpoints are kept)"
        );
    }
    let status = Arc::new(CheckpointStatus::default());
    let run = CheckpointedRun {
        checkpoints: CheckpointConfig {
            interval: args.checkpoint_interval,
            timeout: args.checkpoint_timeout,
            min_pause: args.checkpoint_min_pause,
            tolerable_failures: args.tolerable_failed_checkpoints,
            retain: args.retain_checkpoints.max(1),
            ..CheckpointConfig::default()
        },
        restart: args.restart_strategy()?,
        start_empty: args.no_restore,
        listeners: vec![status.clone()],
        ..CheckpointedRun::default()
    };
    let mut observer = CliObserver {
        pipeline: graph.name.clone(),
        sources: graph
            .nodes()
            .iter()
            .filter(|n| n.inputs.is_empty())
            .map(|n| n.id.0.clone())
            .collect(),
        state: args.state.clone(),
        total_events,
        force_progress,
        progress: None,
        status,
    };
    let outcome = runtime.block_on(riffle_runtime::run_checkpointed(
        graph,
        &store,
        run,
        &mut observer,
    ));
    drop(observer.progress.take());
    Ok(outcome?)
}

/// Prints checkpoint statistics of a run.
pub fn print_report(report: &CheckpointReport) {
    let bytes: u64 = report.bytes.iter().sum();
    eprintln!(
        "  checkpoints      {} committed, {} abandoned; duration p50 {:.0} ms, p99 {:.0} ms; {:.1} MiB written",
        report.committed.len(),
        report.abandoned.len(),
        percentile_ms(&report.durations, 0.5),
        percentile_ms(&report.durations, 0.99),
        bytes as f64 / (1024.0 * 1024.0)
    );
    for e in &report.errors {
        eprintln!("    failed: {e}");
    }
}
