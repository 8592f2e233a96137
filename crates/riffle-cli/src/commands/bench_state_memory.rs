//! `riffle bench --state-memory unlimited,256MiB,…`: what a state budget costs. An
//! unbounded `GROUP BY bidder, url` (count, sum) over `--events` Nexmark bids, whose
//! state grows with its keys, runs as a child `riffle run` under each budget, the runs
//! taking turns; the table gives medians of throughput, its ratio to the first budget's,
//! the child's peak RSS and the checkpoint bytes written over the run (docs/engine.md,
//! "State beyond memory"). A run that restarts fails the benchmark.

use super::bench::BenchArgs;
use super::bench_workers::{checkpoint_interval, median};
use anyhow::{Context, Result};
use riffle_bench::harness::human;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// The job: state grows with the (bidder, url) pairs, about one per three bids.
const GROUPS_SQL: &str = "\
CREATE TABLE bid WITH ('connector' = 'nexmark', 'event_type' = 'bid');
CREATE TABLE out WITH ('connector' = 'blackhole');
INSERT INTO out SELECT bidder, url, count(*) AS n, sum(price) AS total FROM bid GROUP BY bidder, url;
";

/// One run under one budget.
struct Measured {
    events_per_second: f64,
    /// The child's peak RSS, as its run summary gives it.
    peak_mib: Option<f64>,
    /// Checkpoint bytes written over the run.
    written_mib: Option<f64>,
}

/// What a `riffle run` printed: its peak memory and the checkpoint bytes written, in MiB.
fn read_report(stderr: &str) -> (Option<f64>, Option<f64>) {
    let peak = stderr.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("peak memory")?;
        rest.split_whitespace().next()?.parse().ok()
    });
    let written = stderr.lines().find_map(|l| {
        let before = l.strip_suffix(" MiB written")?;
        before.rsplit(' ').next()?.parse().ok()
    });
    (peak, written)
}

fn measure(sql: &Path, args: &BenchArgs, budget: &str, work: &Path) -> Result<Measured> {
    let exe = std::env::current_exe().context("locating the riffle binary")?;
    let (state, spill) = (work.join("state"), work.join("spill"));
    let _ = std::fs::remove_dir_all(&state);
    let _ = std::fs::remove_dir_all(&spill);
    std::fs::create_dir_all(&spill).with_context(|| format!("creating {}", spill.display()))?;
    let mut cmd = Command::new(exe);
    cmd.arg("run")
        .arg(sql)
        .args(["-p", &args.parallelism.to_string()])
        .args(["--events", &args.events.to_string()])
        .args(["--checkpoint-interval", checkpoint_interval(args)])
        .arg("--state")
        .arg(&state)
        .arg("--spill-dir")
        .arg(&spill);
    if budget != "unlimited" {
        cmd.args(["--state-memory", budget]);
    }
    let started = Instant::now();
    let output = cmd.output().context("starting riffle run")?;
    let seconds = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&output.stderr);
    anyhow::ensure!(
        output.status.success(),
        "riffle run under {budget} failed:\n{stderr}"
    );
    // A run that failed over and restarted measures recovery too, not the budget.
    anyhow::ensure!(
        !stderr.contains("riffle: finished after"),
        "riffle run under {budget} restarted:\n{stderr}"
    );
    let (peak_mib, written_mib) = read_report(&stderr);
    Ok(Measured {
        events_per_second: args.events as f64 / seconds.max(1e-9),
        peak_mib,
        written_mib,
    })
}

pub fn run(args: &BenchArgs, budgets: &str) -> Result<()> {
    let budgets: Vec<&str> = budgets.split(',').map(str::trim).collect();
    anyhow::ensure!(
        budgets.iter().all(|b| !b.is_empty()),
        "--state-memory takes budgets separated by commas, e.g. unlimited,256MiB,64MiB"
    );
    let work = args
        .state
        .join(format!("state-memory-{}", std::process::id()));
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let sql = work.join("groups.sql");
    std::fs::write(&sql, GROUPS_SQL)?;
    println!(
        "GROUP BY bidder, url over the bids of {} Nexmark events, p{}, checkpoints every {}, median of {} runs taking turns",
        args.events,
        args.parallelism,
        checkpoint_interval(args),
        args.runs
    );
    println!(
        "{:<12} {:>12} {:>7} {:>14} {:>18}",
        "budget", "events/s", "ratio", "peak RSS MiB", "ckpt MiB written"
    );
    let mut runs: Vec<Vec<Measured>> = budgets.iter().map(|_| Vec::new()).collect();
    for _ in 0..args.runs {
        for (budget, measured) in budgets.iter().zip(runs.iter_mut()) {
            measured.push(measure(&sql, args, budget, &work)?);
        }
    }
    let _ = std::fs::remove_dir_all(&work);
    let rate = |m: &[Measured]| median(m.iter().map(|m| m.events_per_second).collect());
    let mib = |values: Vec<f64>| {
        if values.is_empty() {
            "-".to_string()
        } else {
            format!("{:.0}", median(values))
        }
    };
    let first = rate(&runs[0]);
    for (budget, measured) in budgets.iter().zip(&runs) {
        println!(
            "{:<12} {:>12} {:>7.2} {:>14} {:>18}",
            budget,
            human(rate(measured)),
            rate(measured) / first,
            mib(measured.iter().filter_map(|m| m.peak_mib).collect()),
            mib(measured.iter().filter_map(|m| m.written_mib).collect()),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_gives_the_peak_memory_and_the_checkpoint_bytes() {
        let stderr = "riffle: groups.sql finished in 60.92s\n  checkpoints      36 committed, 0 abandoned; duration p50 1096 ms, p99 3795 ms; 138.1 MiB written\n  peak memory      1269 MiB\n";
        assert_eq!(read_report(stderr), (Some(1269.0), Some(138.1)));
        assert_eq!(read_report("riffle: failed"), (None, None));
    }
}
