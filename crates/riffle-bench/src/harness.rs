//! Runs a job and measures it: wall time, CPU time, peak RSS.

use riffle_runtime::job::{self, JobConfig};
pub use riffle_runtime::readout::{human, percentile_ms};
use riffle_runtime::resources::{cpu_time, peak_rss_bytes, reset_peak_rss};
use riffle_runtime::{JobGraph, JobSummary, RuntimeResult};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// A finished run and what it cost.
#[derive(Debug, Clone)]
pub struct Measured {
    /// What the job reported.
    pub summary: JobSummary,
    /// Wall time.
    pub wall: Duration,
    /// CPU time (all threads).
    pub cpu: Duration,
    /// Peak RSS of the process during the run, bytes.
    pub peak_rss_bytes: Option<u64>,
    /// What the checkpoint coordinator did, for checkpointed runs.
    pub checkpoints: Option<riffle_runtime::CheckpointReport>,
}

/// Times `run` (wall, CPU, peak RSS).
fn measure(
    run: impl FnOnce() -> RuntimeResult<(JobSummary, Option<riffle_runtime::CheckpointReport>)>,
) -> RuntimeResult<Measured> {
    reset_peak_rss();
    let cpu0 = cpu_time();
    let t0 = Instant::now();
    let (summary, checkpoints) = run()?;
    Ok(Measured {
        summary,
        wall: t0.elapsed(),
        cpu: cpu_time().saturating_sub(cpu0),
        peak_rss_bytes: peak_rss_bytes(),
        checkpoints,
    })
}

/// Runs `graph` on `runtime`, measuring it.
///
/// # Errors
/// The job failed.
pub fn run_measured(
    runtime: &tokio::runtime::Runtime,
    graph: &JobGraph,
) -> RuntimeResult<Measured> {
    measure(|| {
        Ok((
            runtime.block_on(job::run(graph, &JobConfig::default()))?,
            None,
        ))
    })
}

/// Runs `graph` taking checkpoints every `interval` into a fresh directory under
/// `state_dir` (removed afterwards), measuring it.
///
/// # Errors
/// The job failed, or the state directory cannot be used.
pub fn run_measured_with_checkpoints(
    runtime: &tokio::runtime::Runtime,
    graph: &JobGraph,
    interval: std::time::Duration,
    state_dir: &std::path::Path,
) -> RuntimeResult<Measured> {
    use riffle_runtime::RuntimeError;
    let root = riffle_state::StateRoot::parse(&state_dir.display().to_string())
        .map_err(|e| RuntimeError::needs_user(e.to_string()))?;
    let store = riffle_state::CheckpointStore::new(root, &graph.name);
    let run = riffle_runtime::CheckpointedRun {
        checkpoints: riffle_runtime::CheckpointConfig {
            interval,
            ..Default::default()
        },
        restart: riffle_runtime::RestartStrategy::None,
        start_empty: true,
        ..Default::default()
    };
    let measured = measure(|| {
        runtime.block_on(async {
            let mut outcome =
                riffle_runtime::run_checkpointed(graph, &store, run.clone(), &mut ()).await?;
            Ok((outcome.summary, outcome.reports.pop()))
        })
    });
    let _ = std::fs::remove_dir_all(state_dir);
    measured
}

/// One line of the benchmark table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchRow {
    /// Query or job name.
    pub query: String,
    /// Parallelism.
    pub parallelism: usize,
    /// Input events.
    pub events: u64,
    /// Rows the sink received.
    pub rows_out: u64,
    /// Median wall seconds.
    pub seconds: f64,
    /// Events per wall second.
    pub events_per_second: f64,
    /// Events per CPU second.
    pub events_per_cpu_second: f64,
    /// Peak RSS in MiB (max over runs).
    pub peak_rss_mib: f64,
    /// Runs the median was taken over.
    pub runs: usize,
    /// Checkpoint interval in ms (0: checkpoints off).
    #[serde(default)]
    pub checkpoint_interval_ms: u64,
    /// Periodic checkpoints committed in the median run (the end-of-input epoch, which
    /// waits for every window to fire, is left out of this and the columns below).
    #[serde(default)]
    pub checkpoints: usize,
    /// Median checkpoint duration (trigger to COMMITTED), ms.
    #[serde(default)]
    pub checkpoint_p50_ms: f64,
    /// 99th-percentile checkpoint duration, ms.
    #[serde(default)]
    pub checkpoint_p99_ms: f64,
    /// Mean state bytes per checkpoint, MiB.
    #[serde(default)]
    pub checkpoint_mib: f64,
    /// Longest barrier alignment over the checkpoints, ms.
    #[serde(default)]
    pub alignment_max_ms: f64,
    /// Median over checkpoints of the longest synchronous snapshot (task paused), ms.
    #[serde(default)]
    pub snapshot_p50_ms: f64,
    /// Median time encoding and writing one checkpoint's state files, ms.
    #[serde(default)]
    pub upload_p50_ms: f64,
    /// Time to plan the SQL text, ms (SQL runs only).
    #[serde(default)]
    pub planning_ms: f64,
}

impl BenchRow {
    /// The median run of `runs` (by wall time) as a row.
    pub fn from_runs(query: &str, parallelism: usize, events: u64, runs: &[Measured]) -> Self {
        let mut by_wall: Vec<&Measured> = runs.iter().collect();
        by_wall.sort_by_key(|m| m.wall);
        let median = by_wall[by_wall.len() / 2];
        let seconds = median.wall.as_secs_f64();
        let cpu = median.cpu.as_secs_f64().max(1e-9);
        let peak = runs
            .iter()
            .filter_map(|m| m.peak_rss_bytes)
            .max()
            .unwrap_or(0);
        Self {
            query: query.into(),
            parallelism,
            events,
            rows_out: median.summary.sink_rows,
            seconds,
            events_per_second: events as f64 / seconds.max(1e-9),
            events_per_cpu_second: events as f64 / cpu,
            peak_rss_mib: peak as f64 / (1024.0 * 1024.0),
            runs: runs.len(),
            checkpoint_interval_ms: 0,
            checkpoints: 0,
            checkpoint_p50_ms: 0.0,
            checkpoint_p99_ms: 0.0,
            checkpoint_mib: 0.0,
            alignment_max_ms: 0.0,
            snapshot_p50_ms: 0.0,
            upload_p50_ms: 0.0,
            planning_ms: 0.0,
        }
        .with_checkpoints(median.checkpoints.as_ref())
    }

    fn with_checkpoints(mut self, report: Option<&riffle_runtime::CheckpointReport>) -> Self {
        let Some(report) = report else { return self };
        // Periodic checkpoints only: the end-of-input epoch (committed last) waits for
        // the final watermark to fire every open window, which is not checkpoint cost.
        let periodic = report.committed.len() - usize::from(report.end_of_input_committed);
        let part = |v: &[Duration]| v[..periodic.min(v.len())].to_vec();
        self.checkpoints = periodic;
        self.checkpoint_p50_ms = percentile_ms(&part(&report.durations), 0.5);
        self.checkpoint_p99_ms = percentile_ms(&part(&report.durations), 0.99);
        let bytes = &report.bytes[..periodic.min(report.bytes.len())];
        self.checkpoint_mib =
            bytes.iter().sum::<u64>() as f64 / bytes.len().max(1) as f64 / (1024.0 * 1024.0);
        self.alignment_max_ms = part(&report.alignment)
            .iter()
            .map(|d| d.as_secs_f64() * 1e3)
            .fold(0.0, f64::max);
        self.snapshot_p50_ms = percentile_ms(&part(&report.snapshot), 0.5);
        self.upload_p50_ms = percentile_ms(&part(&report.upload), 0.5);
        self
    }
}

impl BenchRow {
    /// The median of single-run rows of one query (by wall time), with the largest peak
    /// RSS over them.
    ///
    /// # Panics
    /// If `runs` is empty.
    pub fn median(runs: &[BenchRow]) -> BenchRow {
        let mut sorted: Vec<&BenchRow> = runs.iter().collect();
        sorted.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
        let mut row = sorted[sorted.len() / 2].clone();
        row.peak_rss_mib = runs.iter().map(|r| r.peak_rss_mib).fold(0.0, f64::max);
        row.runs = runs.len();
        row
    }
}

/// The Flink suite's rows as a Markdown table: throughput, memory, checkpoints and the
/// time to plan each text.
pub fn flink_suite_table(rows: &[BenchRow]) -> String {
    let mut out = String::from("| query | p | events | events/s | events/CPU-s | peak RSS MiB | checkpoints | checkpoint p50 ms | planning ms |\n|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.0} | {} | {:.0} | {:.1} |",
            r.query,
            r.parallelism,
            human(r.events as f64),
            human(r.events_per_second),
            human(r.events_per_cpu_second),
            r.peak_rss_mib,
            r.checkpoints,
            r.checkpoint_p50_ms,
            r.planning_ms
        );
    }
    out
}

/// Checkpointed rows as a Markdown table: throughput next to checkpoint costs.
pub fn checkpoint_table(rows: &[BenchRow]) -> String {
    let mut out = String::from("| query | p | events | interval | events/s | checkpoints | p50 ms | p99 ms | MiB/checkpoint | max alignment ms | snapshot p50 ms | upload p50 ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let interval = if r.checkpoint_interval_ms == 0 {
            "off".to_string()
        } else {
            format!("{} ms", r.checkpoint_interval_ms)
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {interval} | {} | {} | {:.0} | {:.0} | {:.1} | {:.1} | {:.1} | {:.0} |",
            r.query,
            r.parallelism,
            human(r.events as f64),
            human(r.events_per_second),
            r.checkpoints,
            r.checkpoint_p50_ms,
            r.checkpoint_p99_ms,
            r.checkpoint_mib,
            r.alignment_max_ms,
            r.snapshot_p50_ms,
            r.upload_p50_ms
        );
    }
    out
}

/// The rows as a Markdown table.
pub fn table(rows: &[BenchRow]) -> String {
    let mut out = String::from("| query | p | events | rows out | seconds | events/s | events/CPU-s | peak RSS MiB |\n|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.2} | {} | {} | {:.0} |",
            r.query,
            r.parallelism,
            human(r.events as f64),
            r.rows_out,
            r.seconds,
            human(r.events_per_second),
            human(r.events_per_cpu_second),
            r.peak_rss_mib
        );
    }
    out
}
