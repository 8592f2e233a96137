//! `riffle bench`: the Nexmark queries and the peer job, timed, as one table.

use crate::units::{parse_count, parse_duration};
use anyhow::{Context, Result};
use riffle_bench::flink_suite;
use riffle_bench::harness::{
    checkpoint_table, flink_suite_table, human, run_measured, run_measured_with_checkpoints, table,
    BenchRow, Measured,
};
use riffle_bench::queries::{self, Query, QueryOptions};
use riffle_bench::restart::{measure_restart, RestartMeasured};
use riffle_bench::sinks::{self, SinkRun, SinkVariant};
use riffle_bench::sql_queries;
use riffle_bench::PeerJob;
use riffle_connectors::nexmark::NexmarkConfig;
use riffle_connectors::sinks::BlackholeSinkFactory;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `riffle bench`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  riffle bench                                  # every query and both peer jobs\n  riffle bench --queries q0,q5 --events 1M --runs 1\n  riffle bench --job peer-window --events 25M --parallelism 1\n  riffle bench --queries q5,q8 --job peer-window --checkpoint-interval 0,10s,1s\n  riffle bench --queries none --job none --restart-keys 27M   # restart with ~1 GiB of state\n  riffle bench --job none --sql --runs 5   # each SQL example against its Rust twin
  riffle bench --flink-suite --job none --checkpoint-interval 1s --runs 1   # the Flink suite's texts
  riffle bench --flink-suite --job none --queries changelog_upsert,changelog_having,changelog_regroup,changelog_inner_join,changelog_left_join
  riffle bench --flink-suite --job none --queries changelog_dedup,changelog_dedup_count,changelog_top_groups
  riffle bench --sinks --events 10M --runs 3   # q0 into Parquet files vs Iceberg tables
  riffle bench --workers 2 --queries q5,q8 --events 10M   # one process vs worker processes
  riffle bench --state-memory unlimited,256MiB,64MiB --events 20M --runs 1   # what spilling costs
  riffle bench --json > bench.jsonl"
)]
pub struct BenchArgs {
    /// Comma-separated queries, or `all`, or `none`.
    #[arg(long, default_value = "all")]
    pub queries: String,
    /// Peer jobs to run: `peer-stateless`, `peer-window`, `all` or `none`.
    #[arg(long, default_value = "all")]
    pub job: String,
    /// Events per Nexmark query.
    #[arg(long, default_value = "10M", value_parser = parse_count)]
    pub events: u64,
    /// Events per peer job.
    #[arg(long, default_value = "25M", value_parser = parse_count)]
    pub peer_events: u64,
    /// Subtasks per operator.
    #[arg(long, short, default_value_t = 2)]
    pub parallelism: usize,
    /// Events per second of event time for Nexmark (V1 suite: 10M).
    #[arg(long, default_value = "10M", value_parser = parse_count)]
    pub rate: u64,
    /// Watermark delay for Nexmark.
    #[arg(long, default_value = "4s", value_parser = parse_duration)]
    pub watermark_delay: Duration,
    /// Runs per row; the table shows the median.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Print JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Checkpoint intervals to measure, comma-separated (`0` = off), e.g. `0,10s,1s`.
    #[arg(long, default_value = "0")]
    pub checkpoint_interval: String,
    /// Directory for benchmark checkpoints (each run uses a fresh subdirectory, removed
    /// afterwards).
    #[arg(long, default_value_os_t = std::env::temp_dir().join("riffle-bench-state"))]
    pub state: std::path::PathBuf,
    /// Only measure how fast a bare Kafka consumer reads RECORDS records of TOPIC
    /// (`BOOTSTRAP/TOPIC/RECORDS`; the baseline of scripts/bench-connectors) and print
    /// records per second.
    #[arg(long, hide = true)]
    pub kafka_baseline: Option<String>,
    /// Also measure a restart with this many keys of window state (about 40 bytes
    /// each; 27M ≈ 1 GiB): checkpoint, stop, and time recovery to the first output row.
    #[arg(long, default_value = "0", value_parser = parse_count)]
    pub restart_keys: u64,
    /// Also run each query's SQL version (examples/nexmark/qN.sql, sink a blackhole),
    /// alternating runs with the Rust-API version, and print SQL/Rust throughput and
    /// planning time. With --in-process: run only the SQL versions.
    #[arg(long)]
    pub sql: bool,
    /// Run every measurement in this process instead of a child process per run (peak
    /// RSS then covers all runs so far).
    #[arg(long)]
    pub in_process: bool,
    /// Run the Flink Nexmark suite's queries as Flink users write them (DDL replaced:
    /// `nexmark` tables with the suite's column names, blackhole sinks; q6 in its
    /// corrected form) instead of riffle's own; --queries names which (e.g. q0,q12,q13),
    /// and also takes riffle's changelog benchmarks, which `all` leaves out:
    /// changelog_upsert, changelog_having, changelog_regroup, changelog_inner_join,
    /// changelog_left_join, changelog_dedup, changelog_dedup_count, changelog_top_groups,
    /// changelog_interval_join, changelog_outer_interval_join, changelog_join_inputs,
    /// changelog_join_of_changelogs, changelog_join_of_distincts, changelog_join_updates.
    #[arg(long)]
    pub flink_suite: bool,
    /// Instead: Nexmark q0 (--events, --parallelism, checkpoints every first
    /// --checkpoint-interval, 1s when 0) into the filesystem Parquet sink and into
    /// Iceberg tables (SQLite catalog and warehouse under --state; needs a build with
    /// `--features iceberg`), runs taking turns; prints rows/s, the ratio to the
    /// Parquet files and the commit step per checkpoint.
    #[arg(long)]
    pub sinks: bool,
    /// Instead: each of --queries (`all`: q5, q8) as its SQL pipeline (blackhole sink,
    /// checkpoints every first nonzero --checkpoint-interval, 1s if none) in one process
    /// at parallelism N, on N worker processes of parallelism 1, and on 3; runs taking
    /// turns. Prints events/s, the ratio, checkpoint duration and exchange throughput.
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Instead: an unbounded `GROUP BY bidder, url` (count, sum) over the bids of --events,
    /// whose state grows with its keys, under each of these budgets (comma-separated,
    /// e.g. `unlimited,256MiB,64MiB`; the first is the ratio's base), as `riffle run
    /// --state-memory` at --parallelism with checkpoints every first nonzero
    /// --checkpoint-interval (1s if none), runs taking turns. Prints events/s, the
    /// ratio, peak RSS and checkpoint bytes written.
    #[arg(long, value_name = "SIZES")]
    pub state_memory: Option<String>,
}

/// Runs `riffle bench --in-process --json …` as a child process (so its peak RSS and
/// memory are its own) and parses the JSON line it prints last.
fn child_json<T: serde::de::DeserializeOwned>(args: &[String], what: &str) -> Result<T> {
    let exe = std::env::current_exe().context("locating the riffle binary")?;
    let output = std::process::Command::new(exe)
        .args(["bench", "--in-process", "--json", "--runs", "1"])
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("starting a benchmark child process")?;
    anyhow::ensure!(
        output.status.success(),
        "benchmark of {what} failed ({})",
        output.status
    );
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text
        .lines()
        .last()
        .context("the benchmark child printed nothing")?;
    serde_json::from_str(line).with_context(|| format!("reading the child's result `{line}`"))
}

/// The restart measurement in a child process.
fn run_restart_child(args: &BenchArgs) -> Result<RestartMeasured> {
    let child_args: Vec<String> = [
        "--queries",
        "none",
        "--job",
        "none",
        "--restart-keys",
        &args.restart_keys.to_string(),
        "--parallelism",
        &args.parallelism.to_string(),
        "--state",
        &args.state.display().to_string(),
    ]
    .map(String::from)
    .to_vec();
    child_json(&child_args, "the restart")
}

fn restart_table(runs: &[RestartMeasured], parallelism: usize) -> String {
    let mut sorted: Vec<&RestartMeasured> = runs.iter().collect();
    sorted.sort_by(|a, b| a.first_output_seconds.total_cmp(&b.first_output_seconds));
    let m = sorted[sorted.len() / 2];
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    // MB/s of the state as it is in memory and as the Parquet files hold it.
    let rate = |bytes: u64, seconds: f64| bytes as f64 / seconds.max(1e-9) / 1e6;
    format!(
        "| restart | p | keys | state in memory MiB | state on disk MiB | savepoint s | savepoint MB/s (memory / disk) | of which checkpoint s | restore (read + check) s | restore MB/s (memory / disk) | restore to first output s |\n|---|---|---|---|---|---|---|---|---|---|---|\n| window by id | {parallelism} | {} | {:.0} | {:.0} | {:.2} | {:.0} / {:.0} | {:.2} | {:.2} | {:.0} / {:.0} | {:.2} |\n",
        human(m.keys as f64),
        mib(m.state_memory_bytes),
        mib(m.state_bytes),
        m.savepoint_seconds,
        rate(m.state_memory_bytes, m.savepoint_seconds),
        rate(m.state_bytes, m.savepoint_seconds),
        m.checkpoint_seconds,
        m.load_seconds,
        rate(m.state_memory_bytes, m.load_seconds),
        rate(m.state_bytes, m.load_seconds),
        m.first_output_seconds
    )
}

/// One measurement in a child process, so its peak RSS is its own.
fn run_child(
    args: &BenchArgs,
    queries: &str,
    job: &str,
    interval: Duration,
    sql: bool,
) -> Result<BenchRow> {
    let mut child_args: Vec<String> = [
        "--queries",
        queries,
        "--job",
        job,
        "--events",
        &args.events.to_string(),
        "--peer-events",
        &args.peer_events.to_string(),
        "--parallelism",
        &args.parallelism.to_string(),
        "--rate",
        &args.rate.to_string(),
        "--watermark-delay",
        &format!("{}ms", args.watermark_delay.as_millis()),
        "--checkpoint-interval",
        &format!("{}ms", interval.as_millis()),
        "--state",
        &args.state.display().to_string(),
    ]
    .map(String::from)
    .to_vec();
    if sql {
        child_args.push("--sql".into());
    }
    if args.flink_suite {
        child_args.push("--flink-suite".into());
    }
    child_json(&child_args, &format!("{queries}{job}"))
}

impl BenchArgs {
    /// Every `--checkpoint-interval` (a comma-separated list).
    fn checkpoint_intervals(&self) -> Result<Vec<Duration>> {
        self.checkpoint_interval
            .split(',')
            .map(|d| parse_duration(d).map_err(anyhow::Error::msg))
            .collect()
    }

    /// The first `--checkpoint-interval`, for the benchmarks that take one.
    fn first_checkpoint_interval(&self) -> Result<Duration> {
        Ok(self
            .checkpoint_intervals()?
            .first()
            .copied()
            .unwrap_or_default())
    }
}

/// The multi-threaded runtime the benchmarks run pipelines on.
fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")
}

pub fn run(args: BenchArgs) -> Result<()> {
    anyhow::ensure!(args.runs >= 1, "--runs must be at least 1");
    if let Some(spec) = &args.kafka_baseline {
        let mut parts = spec.rsplitn(3, '/');
        let (Some(records), Some(topic), Some(bootstrap)) =
            (parts.next(), parts.next(), parts.next())
        else {
            anyhow::bail!("--kafka-baseline takes BOOTSTRAP/TOPIC/RECORDS, not `{spec}`");
        };
        let records = parse_count(records).map_err(anyhow::Error::msg)?;
        let rate = riffle_bench::kafka_baseline::consume_rate(bootstrap, topic, records)?;
        println!("{rate:.0}");
        return Ok(());
    }
    if args.flink_suite {
        return run_flink_suite(&args);
    }
    if args.sinks {
        return run_sinks(&args);
    }
    if let Some(workers) = args.workers {
        return super::bench_workers::run(&args, workers);
    }
    if let Some(budgets) = &args.state_memory {
        return super::bench_state_memory::run(&args, budgets);
    }
    let queries: Vec<Query> = match args.queries.as_str() {
        "all" => Query::ALL.to_vec(),
        "none" | "" => Vec::new(),
        list => list
            .split(',')
            .map(Query::parse)
            .collect::<Result<_, _>>()?,
    };
    let jobs: Vec<PeerJob> = match args.job.as_str() {
        "all" => vec![PeerJob::Stateless, PeerJob::Window],
        "none" | "" => Vec::new(),
        list => list
            .split(',')
            .map(PeerJob::parse)
            .collect::<Result<_, _>>()?,
    };
    let intervals = args.checkpoint_intervals()?;
    let checkpointed = intervals.iter().any(|d| !d.is_zero());
    let runtime = runtime()?;
    let mut rows = Vec::new();
    let mut emit = |row: BenchRow| -> Result<()> {
        if args.json {
            println!("{}", serde_json::to_string(&row)?);
        } else {
            eprintln!(
                "  {:<16} {:>8.2}s  {:>10.0} events/s",
                row.query, row.seconds, row.events_per_second
            );
        }
        rows.push(row);
        Ok(())
    };
    let print_table = |rows: &[BenchRow]| {
        if args.json || rows.is_empty() {
            return;
        }
        if checkpointed {
            print!("{}", checkpoint_table(rows));
        } else {
            print!("{}", table(rows));
        }
    };
    if args.in_process && args.restart_keys > 0 {
        let dir = args.state.join(format!("restart-{}", std::process::id()));
        let measured = measure_restart(&runtime, args.restart_keys, args.parallelism, &dir)
            .context("restart benchmark failed")?;
        println!("{}", serde_json::to_string(&measured)?);
        return Ok(());
    }
    if !args.in_process {
        let names: Vec<(String, bool)> = queries
            .iter()
            .map(|q| (q.to_string(), true))
            .chain(jobs.iter().map(|j| (j.name().to_string(), false)))
            .collect();
        for (name, is_query) in names {
            let (q, j) = if is_query {
                (name.as_str(), "none")
            } else {
                ("none", name.as_str())
            };
            // Intervals (and the SQL twin) take turns run by run, so drift in a noisy
            // machine's speed affects every variant alike and their ratios stay fair.
            let variants: Vec<(Duration, bool)> = intervals
                .iter()
                .flat_map(|&i| {
                    let sql = (args.sql && is_query).then_some((i, true));
                    std::iter::once((i, false)).chain(sql)
                })
                .collect();
            let mut runs: Vec<Vec<_>> = variants.iter().map(|_| Vec::new()).collect();
            for _ in 0..args.runs {
                for (v, &(interval, sql)) in variants.iter().enumerate() {
                    runs[v].push(run_child(&args, q, j, interval, sql)?);
                }
            }
            for (runs, &(_, sql)) in runs.iter().zip(&variants) {
                let mut row = BenchRow::median(runs);
                if sql {
                    row.query = format!("{} (sql)", row.query);
                }
                emit(row)?;
            }
        }
        print_table(&rows);
        if args.sql && !args.json && !queries.is_empty() {
            print!("{}", sql_table(&rows, &queries, &args)?);
        }
        if args.restart_keys > 0 {
            let runs = (0..args.runs)
                .map(|_| run_restart_child(&args))
                .collect::<Result<Vec<_>>>()?;
            if args.json {
                for r in &runs {
                    println!("{}", serde_json::to_string(r)?);
                }
            } else {
                print!("{}", restart_table(&runs, args.parallelism));
            }
        }
        return Ok(());
    }
    // In process: exactly one query or job per child, one interval.
    let interval = intervals.first().copied().unwrap_or_default();
    let measure = |graph: &riffle_runtime::JobGraph, n: usize| {
        if interval.is_zero() {
            run_measured(&runtime, graph)
        } else {
            let dir = args.state.join(format!("run-{}-{n}", std::process::id()));
            run_measured_with_checkpoints(&runtime, graph, interval, &dir)
        }
    };
    let mut measured: Vec<(String, u64, Vec<Measured>)> = Vec::new();
    for query in queries {
        let opts = query_options(&args);
        let mut runs = Vec::new();
        for n in 0..args.runs {
            let graph = if args.sql {
                sql_queries::build(query, &opts)?.0
            } else {
                queries::build(query, &opts, Arc::new(BlackholeSinkFactory))?
            };
            runs.push(measure(&graph, n).with_context(|| format!("{query} failed"))?);
        }
        measured.push((query.to_string(), args.events, runs));
    }
    for job in jobs {
        let mut runs = Vec::new();
        for n in 0..args.runs {
            let graph = job.build(
                args.peer_events,
                args.parallelism,
                Arc::new(BlackholeSinkFactory),
            )?;
            runs.push(measure(&graph, n).with_context(|| format!("{} failed", job.name()))?);
        }
        measured.push((job.name().to_string(), args.peer_events, runs));
    }
    for (name, events, runs) in measured {
        let mut row = BenchRow::from_runs(&name, args.parallelism, events, &runs);
        row.checkpoint_interval_ms = interval.as_millis() as u64;
        emit(row)?;
    }
    print_table(&rows);
    Ok(())
}

/// `--flink-suite`: each suite query in child processes (medians of `--runs`), or, in
/// process, the one query named.
fn run_flink_suite(args: &BenchArgs) -> Result<()> {
    let names: Vec<String> = match args.queries.as_str() {
        "all" => flink_suite::runnable()
            .map(|(n, _)| n.to_string())
            .collect(),
        "none" | "" => Vec::new(),
        list => list.split(',').map(str::to_string).collect(),
    };
    let interval = args.first_checkpoint_interval()?;
    if args.in_process {
        let runtime = runtime()?;
        let dir = args
            .state
            .join(format!("flink-suite-{}", std::process::id()));
        for name in names {
            let run = flink_suite::SuiteRun {
                events: args.events,
                rate: args.rate,
                watermark_delay: args.watermark_delay,
                parallelism: args.parallelism,
                side_input_dir: &dir,
            };
            let (graph, planning) = flink_suite::plan(&name, &run)?;
            let measured = if interval.is_zero() {
                run_measured(&runtime, &graph)
            } else {
                run_measured_with_checkpoints(&runtime, &graph, interval, &dir.join("state"))
            }
            .with_context(|| format!("{name} failed"))?;
            let mut row = BenchRow::from_runs(&name, args.parallelism, args.events, &[measured]);
            row.checkpoint_interval_ms = interval.as_millis() as u64;
            row.planning_ms = planning.as_secs_f64() * 1e3;
            println!("{}", serde_json::to_string(&row)?);
        }
        let _ = std::fs::remove_dir_all(&dir);
        return Ok(());
    }
    let mut rows = Vec::new();
    for name in &names {
        let runs = (0..args.runs)
            .map(|_| run_child(args, name, "none", interval, false))
            .collect::<Result<Vec<_>>>()?;
        let row = BenchRow::median(&runs);
        if args.json {
            println!("{}", serde_json::to_string(&row)?);
        } else {
            eprintln!(
                "  {:<14} {:>8.2}s  {:>10.0} events/s",
                row.query, row.seconds, row.events_per_second
            );
        }
        rows.push(row);
    }
    if !args.json && !rows.is_empty() {
        print!("{}", flink_suite_table(&rows));
    }
    Ok(())
}

/// SQL against Rust per query (throughput ratio of the medians, measured in alternation)
/// and the median time to plan the SQL file.
fn sql_table(rows: &[BenchRow], queries: &[Query], args: &BenchArgs) -> Result<String> {
    use std::fmt::Write as _;
    let mut out = String::from(
        "\n| query | p | Rust events/s | SQL events/s | SQL / Rust | planning ms |\n|---|---|---|---|---|---|\n",
    );
    let opts = query_options(args);
    for query in queries {
        let name = query.to_string();
        let sql_name = format!("{name} (sql)");
        let (Some(rust), Some(sql)) = (
            rows.iter().find(|r| r.query == name),
            rows.iter().find(|r| r.query == sql_name),
        ) else {
            continue;
        };
        let mut planning: Vec<f64> = (0..5)
            .map(|_| Ok(sql_queries::build(*query, &opts)?.1.as_secs_f64() * 1e3))
            .collect::<Result<_>>()?;
        planning.sort_by(f64::total_cmp);
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {:.2} | {:.1} |",
            rust.parallelism,
            riffle_bench::harness::human(rust.events_per_second),
            riffle_bench::harness::human(sql.events_per_second),
            sql.events_per_second / rust.events_per_second,
            planning[planning.len() / 2]
        );
    }
    Ok(out)
}

/// `--sinks`: every [`SinkVariant`] in turn, `--runs` times, in this process.
fn run_sinks(args: &BenchArgs) -> Result<()> {
    let interval = match args.first_checkpoint_interval()? {
        unset if unset.is_zero() => Duration::from_secs(1),
        interval => interval,
    };
    let runtime = runtime()?;
    let dir = args.state.join(format!("sinks-{}", std::process::id()));
    let mut runs: Vec<(SinkVariant, Vec<SinkRun>)> =
        SinkVariant::ALL.iter().map(|v| (*v, Vec::new())).collect();
    for n in 0..args.runs {
        for (variant, measured) in &mut runs {
            let graph = sinks::plan(*variant, &dir, n, args.events, args.parallelism)?;
            let state = dir.join(format!("state-{n}"));
            let m = run_measured_with_checkpoints(&runtime, &graph, interval, &state)
                .with_context(|| format!("{} failed", variant.label()))?;
            let report = m.checkpoints.unwrap_or_default();
            // The end-of-input epoch waits for the input's end: periodic ones only.
            let periodic = report
                .commit
                .len()
                .saturating_sub(usize::from(report.end_of_input_committed));
            let mut commits = report.commit[..periodic].to_vec();
            commits.sort();
            let run = SinkRun {
                rows_per_second: m.summary.sink_rows as f64 / m.wall.as_secs_f64().max(1e-9),
                commit: commits.get(commits.len() / 2).copied().unwrap_or_default(),
            };
            eprintln!(
                "  {:<48} run {n}: {:>10.0} rows/s, commit step {:.1} ms",
                variant.label(),
                run.rows_per_second,
                run.commit.as_secs_f64() * 1e3
            );
            measured.push(run);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    let header = format!(
        "q0, {} events, p{}, {} ms checkpoints, median of {}",
        riffle_bench::harness::human(args.events as f64),
        args.parallelism,
        interval.as_millis(),
        args.runs
    );
    print!("{}", sinks::table(&runs, &header));
    Ok(())
}

/// The Nexmark settings of a benchmark run.
fn query_options(args: &BenchArgs) -> QueryOptions {
    QueryOptions {
        nexmark: NexmarkConfig {
            events: Some(args.events),
            first_event_rate: args.rate,
            ..NexmarkConfig::default()
        },
        parallelism: args.parallelism,
        watermark_delay: args.watermark_delay,
        ..QueryOptions::default()
    }
}
