//! `riffle bench --workers N`: what spreading a job over worker processes costs. Each
//! query's SQL pipeline (blackhole sink; the peer jobs over a `sequence` table) runs as
//! one process at parallelism N, as N workers of parallelism 1 each (`riffle run
//! --workers N`), and as 3 workers, the runs taking turns; the table gives medians
//! (docs/cluster.md).

use super::bench::BenchArgs;
use super::worker::Finished;
use anyhow::{Context, Result};
use riffle_bench::harness::human;
use riffle_bench::queries::{Query, QueryOptions};
use riffle_bench::sql_queries;
use riffle_bench::PeerJob;
use std::process::Command;
use std::time::Instant;

/// One measured run of a pipeline as a child `riffle run`.
struct Measured {
    events_per_second: f64,
    /// Median checkpoint duration, from the coordinator's report.
    checkpoint_ms: Option<f64>,
    /// Bytes sent over exchange streams, and the streams, over all workers.
    exchange: (u64, usize),
    seconds: f64,
}

/// What a `riffle run` printed: checkpoint p50 and exchange totals.
fn read_report(stderr: &str) -> (Option<f64>, (u64, usize)) {
    let checkpoint_ms = stderr.lines().find_map(|l| {
        let rest = l.split("duration p50 ").nth(1)?;
        rest.split_whitespace().next()?.parse().ok()
    });
    let exchange = stderr
        .lines()
        .filter_map(Finished::parse)
        .fold((0, 0), |(bytes, streams), f| {
            (bytes + f.sent_bytes, streams + f.streams as usize)
        });
    (checkpoint_ms, exchange)
}

fn measure(
    file: &std::path::Path,
    args: &BenchArgs,
    events: u64,
    (workers, p): (usize, usize),
) -> Result<Measured> {
    let exe = std::env::current_exe().context("locating the riffle binary")?;
    let state = args.state.join(format!("workers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let interval = checkpoint_interval(args);
    let mut cmd = Command::new(exe);
    cmd.arg("run")
        .arg(file)
        .args(["-p", &p.to_string(), "--events", &events.to_string()])
        .args(["--checkpoint-interval", interval, "--state"])
        .arg(&state);
    if workers > 1 {
        cmd.args(["--workers", &workers.to_string()]);
    }
    let started = Instant::now();
    let output = cmd.output().context("starting riffle run")?;
    let seconds = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&output.stderr);
    anyhow::ensure!(output.status.success(), "riffle run failed:\n{stderr}");
    let _ = std::fs::remove_dir_all(&state);
    let (checkpoint_ms, exchange) = read_report(&stderr);
    Ok(Measured {
        events_per_second: events as f64 / seconds.max(1e-9),
        checkpoint_ms,
        exchange,
        seconds,
    })
}

/// What `riffle bench --workers` runs: a Nexmark query's SQL example or a peer job's
/// SQL form.
#[derive(Debug, Clone, Copy)]
enum Job {
    Nexmark(Query),
    Peer(PeerJob),
}

impl Job {
    fn name(self) -> String {
        match self {
            Job::Nexmark(query) => query.to_string(),
            Job::Peer(peer) => peer.name().to_string(),
        }
    }

    fn sql_text(self, args: &BenchArgs) -> String {
        match self {
            Job::Nexmark(query) => {
                let mut opts = QueryOptions {
                    watermark_delay: args.watermark_delay,
                    ..QueryOptions::default()
                };
                opts.nexmark.first_event_rate = args.rate;
                sql_queries::benchmark_text(query, &opts)
            }
            Job::Peer(peer) => peer.sql_text(),
        }
    }

    /// `--events` for the query, `--peer-events` for a peer job.
    fn events(self, args: &BenchArgs) -> u64 {
        match self {
            Job::Nexmark(_) => args.events,
            Job::Peer(_) => args.peer_events,
        }
    }
}

/// The checkpoint interval of the runs: the first nonzero one of `--checkpoint-interval`
/// (workers need checkpoints), else 1 s.
pub(super) fn checkpoint_interval(args: &BenchArgs) -> &str {
    args.checkpoint_interval
        .split(',')
        .find(|i| *i != "0")
        .unwrap_or("1s")
}

pub(super) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

pub fn run(args: &BenchArgs, workers: usize) -> Result<()> {
    anyhow::ensure!(
        workers >= 2,
        "--workers compares 2 or more workers with one process"
    );
    let mut jobs: Vec<Job> = match args.queries.as_str() {
        "all" => vec![Job::Nexmark(Query::Q5), Job::Nexmark(Query::Q8)],
        "none" => vec![],
        list => list
            .split(',')
            .map(|q| Query::parse(q).map(Job::Nexmark))
            .collect::<Result<_, _>>()?,
    };
    match args.job.as_str() {
        // The stateless peer job has no exchange to measure.
        "all" => jobs.push(Job::Peer(PeerJob::Window)),
        "none" => {}
        list => {
            for name in list.split(',') {
                jobs.push(Job::Peer(PeerJob::parse(name)?));
            }
        }
    }
    let dir = tempfile_dir()?;
    println!(
        "{} events per query run ({} per peer job), checkpoints every {}, median of {} runs taking turns",
        args.events,
        args.peer_events,
        checkpoint_interval(args),
        args.runs
    );
    println!(
        "{:<11} {:>14} {:>14} {:>7} {:>14} {:>9} {:>9} {:>9} {:>16}",
        "job",
        format!("1×p{workers} ev/s"),
        format!("{workers}×p1 ev/s"),
        "ratio",
        "3×p1 ev/s",
        "ckpt 1×",
        format!("ckpt {workers}×"),
        "ckpt 3×",
        "MB/s per stream"
    );
    for job in jobs {
        let file = dir.join(format!("{}.sql", job.name()));
        std::fs::write(&file, job.sql_text(args))?;
        let mut runs: [Vec<Measured>; 3] = Default::default();
        for _ in 0..args.runs {
            let events = job.events(args);
            runs[0].push(measure(&file, args, events, (1, workers))?);
            runs[1].push(measure(&file, args, events, (workers, workers))?);
            runs[2].push(measure(&file, args, events, (3, 3))?);
        }
        let rate = |i: usize| median(runs[i].iter().map(|m| m.events_per_second).collect());
        let ckpt = |i: usize| {
            let v: Vec<f64> = runs[i].iter().filter_map(|m| m.checkpoint_ms).collect();
            if v.is_empty() {
                "-".to_string()
            } else {
                format!("{:.0} ms", median(v))
            }
        };
        let per_stream = median(
            runs[1]
                .iter()
                .map(|m| {
                    let (bytes, streams) = m.exchange;
                    bytes as f64 / streams.max(1) as f64 / m.seconds / 1e6
                })
                .collect(),
        );
        println!(
            "{:<11} {:>14} {:>14} {:>7.2} {:>14} {:>9} {:>9} {:>9} {:>16.1}",
            job.name(),
            human(rate(0)),
            human(rate(1)),
            rate(1) / rate(0),
            human(rate(2)),
            ckpt(0),
            ckpt(1),
            ckpt(2),
            per_stream
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("riffle-bench-workers-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_gives_the_checkpoint_median_and_the_exchange_totals() {
        let stderr = "riffle: worker 1 finished (generation 1): rows in / out 5 / 0; sent 1000 bytes over 4 exchange streams\n\
                      riffle: worker 0 finished (generation 1): rows in / out 5 / 9; sent 500 bytes over 2 exchange streams\n  checkpoints      7 committed, 0 abandoned; duration p50 31 ms, p99 40 ms; 0.1 MiB written";
        let (ckpt, exchange) = read_report(stderr);
        assert_eq!(ckpt, Some(31.0));
        assert_eq!(exchange, (1500, 6));
    }
}
