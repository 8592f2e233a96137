//! Runs a planned dataflow with progress and prints the run summary; shared by
//! `riffle run` (SQL) and `riffle nexmark` (the Rust-API queries).

use super::checkpointing::CheckpointArgs;
use crate::progress::ProgressLine;
use anyhow::{Context, Result};
use riffle_runtime::job::{self, JobConfig};
use riffle_runtime::readout::human;
use riffle_runtime::resources::{cpu_time, peak_rss_bytes};
use riffle_runtime::{JobGraph, JobSummary};
use std::time::Instant;

/// What to run and how to report it.
pub struct Job<'a> {
    /// What the job is, for messages: `nexmark q5`, `q5.sql`.
    pub label: &'a str,
    /// The dataflow.
    pub graph: &'a JobGraph,
    /// Events the sources will generate, when known (progress and throughput).
    pub events: Option<u64>,
    /// Checkpoints, state root and restore options.
    pub checkpoints: &'a CheckpointArgs,
    /// Draw the progress line even when stderr is not a terminal.
    pub progress: bool,
}

/// Refuses restore options without checkpoints.
pub fn check_restore_options(checkpoints: &CheckpointArgs) -> Result<()> {
    anyhow::ensure!(
        checkpoints.enabled()
            || (checkpoints.from_savepoint.is_none()
                && checkpoints.from_checkpoint.is_none()
                && !checkpoints.allow_non_restored_state),
        "--from-savepoint and --from-checkpoint need checkpoints on: add --checkpoint-interval (e.g. 1s)"
    );
    Ok(())
}

/// What `--state-memory size` bounds in `graph`, for a line at the start: which
/// stateful operators hold their state outside it; `None` when every one keeps to it.
fn budget_notice(size: &str, graph: &JobGraph) -> Option<String> {
    let (outside, budgeted) = graph.state_outside_budget();
    let names = |ids: &[&riffle_core::OperatorId]| {
        ids.iter()
            .map(|id| format!("`{id}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (budgeted, outside.as_slice()) {
        (true, []) => None,
        (false, []) => Some(format!(
            "riffle: --state-memory {size}: this job has no unbounded GROUP BY, the one operator that keeps to it today; it bounds nothing here"
        )),
        (false, ids) => Some(format!(
            "riffle: --state-memory {size}: this job has no unbounded GROUP BY, the one operator that keeps to it today; the state of {} stays in memory",
            names(ids)
        )),
        (true, ids) => Some(format!(
            "riffle: --state-memory {size} is shared by the unbounded GROUP BYs; the state of {} stays in memory outside it",
            names(ids)
        )),
    }
}

/// Prints, for a run with a `--state-memory` budget, which stateful operators of
/// `graph` hold their state outside it (one process, or each worker).
pub fn print_budget_notice(checkpoints: &CheckpointArgs, graph: &JobGraph) {
    let Some(size) = checkpoints.state_budget() else {
        return;
    };
    if let Some(notice) = budget_notice(size, graph) {
        eprintln!("{notice}");
    }
}

/// Prints how long a resumed run's restore took: its slowest operator subtask's (they
/// restore in parallel, and rows wait behind one that has not finished). Nothing for a
/// run that restored nothing.
pub fn print_restore_time(summary: &JobSummary) {
    let slowest = (summary.operators.iter())
        .filter_map(|o| o.restore_time.map(|t| (t, &o.operator)))
        .max();
    if let Some((took, operator)) = slowest {
        eprintln!(
            "  state restored   in {:.2}s (slowest: a subtask of `{operator}`)",
            took.as_secs_f64()
        );
    }
}

/// Runs the job to its end (or its stop) and prints the summary.
pub fn run(job: Job<'_>) -> Result<()> {
    let label = job.label;
    print_budget_notice(job.checkpoints, job.graph);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let started = Instant::now();
    let cpu0 = cpu_time();
    let mut stopped = false;
    let (summary, reports) = if job.checkpoints.enabled() {
        let outcome = super::checkpointing::run(
            &runtime,
            job.graph,
            job.checkpoints,
            job.events,
            job.progress,
        )
        .with_context(|| format!("{label} failed"))?;
        if outcome.restarts > 0 {
            eprintln!("riffle: finished after {} restart(s)", outcome.restarts);
        }
        if let Some(result) = &outcome.stopped {
            stopped = true;
            super::checkpointing::print_stopped(result, &job.checkpoints.state);
        }
        (outcome.summary, outcome.reports)
    } else {
        let state_memory = job.checkpoints.state_memory()?;
        let summary = runtime
            .block_on(async {
                let config = JobConfig {
                    state_memory,
                    ..JobConfig::default()
                };
                let handle = job::start(job.graph, &config, false)?;
                let progress =
                    ProgressLine::start(handle.metrics.clone(), job.events, job.progress, None);
                let result = handle.wait().await;
                drop(progress);
                result
            })
            .with_context(|| format!("{label} failed"))?;
        (summary, Vec::new())
    };
    let seconds = started.elapsed().as_secs_f64();
    let cpu = cpu_time().saturating_sub(cpu0).as_secs_f64();
    eprintln!("riffle: {label} finished in {seconds:.2}s");
    // A run stopped with a savepoint generated only part of its events.
    // (count, heading, note after the count, unit of the rates)
    let (events, heading, rest, unit) = match job.events {
        Some(e) if !stopped => (e, "events", "", "events"),
        _ if stopped => (
            summary.source_rows,
            "events",
            "rows read before the stop ",
            "rows",
        ),
        _ => (summary.source_rows, "rows", "read ", "rows"),
    };
    eprintln!(
        "  {heading:<16} {events} {rest}({} {unit}/s, {} {unit} per CPU-second)",
        human(events as f64 / seconds.max(1e-9)),
        human(events as f64 / cpu.max(1e-9))
    );
    eprintln!(
        "  rows in / out    {} / {}",
        summary.source_rows, summary.sink_rows
    );
    eprintln!("  late rows dropped {}", summary.late_rows_dropped());
    print_restore_time(&summary);
    if summary.records_skipped() > 0 {
        eprintln!(
            "  malformed records skipped {} (the source's 'on_malformed' = 'skip')",
            summary.records_skipped()
        );
    }
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
