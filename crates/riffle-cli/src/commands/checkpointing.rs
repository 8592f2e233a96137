//! Checkpoint options shared by the commands that run pipelines, and running a pipeline
//! with them: recovery messages, restarts, and the checkpoint statistics.

use crate::progress::{CheckpointStatus, ProgressLine};
use crate::units::{event_time, parse_duration, parse_size};
use anyhow::{Context, Result};
use riffle_control::{ControlOptions, ControlServer, JobOutline, LiveMetrics};
use riffle_core::arrow::util::display::array_value_to_string;
use riffle_core::state::KEY_GROUP_FIELD;
use riffle_core::Epoch;
use riffle_core::OperatorId;
use riffle_runtime::readout::percentile_ms;
use riffle_runtime::recovery::{ExplicitRestore, Recovered, RestoreFrom};
use riffle_runtime::savepoint::request_savepoint;
use riffle_runtime::supervisor::Restart;
use riffle_runtime::{savepoint_channel, JobConfig, SavepointDone, SavepointSender};
use riffle_runtime::{
    CheckpointConfig, CheckpointReport, CheckpointedOutcome, CheckpointedRun, JobGraph, JobMetrics,
    RestartStrategy, RestoredJob, RunObserver, RuntimeError,
};
use riffle_state::layout::parse_epoch_dir;
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
    #[arg(long, conflicts_with_all = ["from_savepoint", "from_checkpoint"])]
    pub no_restore: bool,
    /// When the newest checkpoints are damaged and a sink cannot take back what they
    /// published (PostgreSQL, Kafka), resume from an older one anyway: those rows are
    /// then written twice. Without it such a run is refused; files are taken back.
    #[arg(long)]
    pub accept_replayed_output: bool,
    /// Remove output this run may not write over, then take it over: exactly-once
    /// output of an earlier run when starting from empty state (no checkpoint in
    /// --state, or --no-restore), or an output directory another pipeline owns. Without
    /// it such a run is refused. Rows in a table or topic cannot be removed: the run is
    /// refused, saying what to delete.
    #[arg(long)]
    pub replace_output: bool,
    /// Start from this savepoint instead of the newest checkpoint: a label in --state,
    /// or the URL of a savepoint directory elsewhere
    /// (`file:///root/{pipeline}/savepoints/{label}`, `s3://bucket/prefix/{pipeline}/savepoints/{label}`),
    /// which is copied into --state first. Parallelism may differ from the savepoint's.
    #[arg(long, conflicts_with = "from_checkpoint")]
    pub from_savepoint: Option<String>,
    /// Start from this checkpoint instead of the newest one: an epoch in --state, or the
    /// URL of a checkpoint directory (`…/{pipeline}/checkpoints/epoch=000042`).
    #[arg(long)]
    pub from_checkpoint: Option<String>,
    /// With --from-savepoint or --from-checkpoint: drop the state of operators the
    /// pipeline no longer has (refused otherwise, naming them).
    #[arg(long)]
    pub allow_non_restored_state: bool,
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
    /// --restart-delay), `exponential` (doubling from --restart-delay up to 1 minute with
    /// each failure in a row) or `none`.
    #[arg(long, default_value = "fixed")]
    pub restart: String,
    /// Failures in a row the job survives: a failure is in a row with the one before
    /// when no checkpoint committed between them. Once a checkpoint commits after a
    /// restart the count (and the exponential back-off) starts over, so a job that
    /// keeps making progress is restarted however often it fails over its life.
    #[arg(long, default_value_t = 3)]
    pub restart_attempts: u32,
    /// Wait before a restart (the first of a row, for `exponential`).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub restart_delay: Duration,
    /// Memory for operator state in this process (each worker's own), e.g. 512MiB or
    /// 8GiB, shared evenly by the subtasks of the unbounded GROUP BYs, the operators
    /// that keep to it today: each moves its coldest groups beyond its share to a local
    /// spill tier (--spill-dir) and takes them back when their keys return, and a
    /// restore larger than the share goes into the tier; checkpoints still hold every
    /// group. Other stateful operators (windows, joins, Top-N) keep their state in
    /// memory outside the budget, and the run names them at its start. The budget
    /// bounds the group tables, not yet the whole process (the tier's own memtables and
    /// cache, and a snapshot's files on their way to storage, come on top:
    /// docs/engine.md, "State beyond memory"). Spilling is slow: several times the
    /// unlimited run's time. Default: `unlimited`.
    #[arg(long, value_name = "SIZE")]
    pub state_memory: Option<String>,
    /// Where the spill tier of --state-memory lives: a local directory, best on the
    /// fastest local disk (not a memory-backed /tmp). A cache a restart may lose.
    #[arg(long, value_name = "DIR")]
    pub spill_dir: Option<std::path::PathBuf>,
    /// Serve the control endpoint (the web page, Prometheus /metrics, the REST API) on
    /// this address instead of a free port on 127.0.0.1, e.g. 127.0.0.1:8081 or
    /// 0.0.0.0:8081. Any address but loopback makes every request need the job's token
    /// (printed at start, and in {state}/{pipeline}/_control_token).
    #[arg(long, value_name = "HOST:PORT")]
    pub http_address: Option<std::net::SocketAddr>,
    /// The certificate chain (PEM) the control endpoint serves HTTPS with; needed when
    /// --http-address is beyond loopback (a worker uses its --tls-cert by default).
    #[arg(long, value_name = "FILE", requires = "http_tls_key")]
    pub http_tls_cert: Option<std::path::PathBuf>,
    /// The private key (PEM) of --http-tls-cert.
    #[arg(long, value_name = "FILE", requires = "http_tls_cert")]
    pub http_tls_key: Option<std::path::PathBuf>,
    /// Serve plain HTTP beyond loopback, on a network you trust: the token and every
    /// answer travel readable.
    #[arg(long, conflicts_with = "http_tls_cert")]
    pub http_insecure: bool,
}

impl CheckpointArgs {
    /// The control endpoint's HTTPS: --http-tls-cert and --http-tls-key, or else
    /// `fallback` (a worker's exchange certificate and key).
    pub fn http_tls(
        &self,
        fallback: Option<(&std::path::Path, &std::path::Path)>,
    ) -> Result<Option<riffle_control::tls::ServerTls>> {
        let pair = match (&self.http_tls_cert, &self.http_tls_key) {
            (Some(cert), Some(key)) => Some((cert.as_path(), key.as_path())),
            _ if self.http_insecure => None,
            _ => fallback,
        };
        Ok(match pair {
            Some((cert, key)) => Some(riffle_control::tls::ServerTls::from_files(cert, key)?),
            None => None,
        })
    }

    /// The process's state memory budget and spill directory (`--state-memory`,
    /// `--spill-dir`); `None` for `unlimited`. With a budget, the allocator returns
    /// large freed blocks at once (`allocator.rs`).
    ///
    /// # Errors
    /// --state-memory is not an amount of memory.
    pub fn state_memory(&self) -> Result<Option<riffle_core::StateMemory>> {
        let Some(size) = self.state_budget() else {
            return Ok(None);
        };
        let bytes = parse_size(size).map_err(|e| anyhow::anyhow!("--state-memory: {e}"))?;
        let spill_dir =
            (self.spill_dir.clone()).unwrap_or_else(|| std::env::temp_dir().join("riffle-spill"));
        riffle_operators::spill::sweep_abandoned(&spill_dir);
        crate::allocator::return_large_blocks();
        Ok(Some(riffle_core::StateMemory { bytes, spill_dir }))
    }

    /// `--state-memory` as given, unless it is `unlimited` (or not given).
    pub fn state_budget(&self) -> Option<&str> {
        self.state_memory.as_deref().filter(|s| *s != "unlimited")
    }

    /// Whether checkpoints are on.
    pub fn enabled(&self) -> bool {
        !self.checkpoint_interval.is_zero()
    }

    /// The named savepoint or checkpoint to start from, if any.
    pub fn explicit_restore(&self, store: &CheckpointStore) -> Result<Option<ExplicitRestore>> {
        let from = match (&self.from_savepoint, &self.from_checkpoint) {
            (Some(savepoint), _) => match split_state_url(savepoint, "savepoints")? {
                None => RestoreFrom::Savepoint {
                    store: store.clone(),
                    label: savepoint.clone(),
                },
                Some((root, pipeline, label)) => RestoreFrom::Savepoint {
                    store: open_store(&root, &pipeline)?,
                    label,
                },
            },
            (None, Some(checkpoint)) => match split_state_url(checkpoint, "checkpoints")? {
                None => RestoreFrom::Checkpoint {
                    store: store.clone(),
                    epoch: Epoch(checkpoint.parse().with_context(|| {
                        format!("--from-checkpoint `{checkpoint}` is neither an epoch number nor a checkpoint URL")
                    })?),
                },
                Some((root, pipeline, dir)) => RestoreFrom::Checkpoint {
                    store: open_store(&root, &pipeline)?,
                    epoch: parse_epoch_dir(&dir).with_context(|| {
                        format!("`{checkpoint}` does not end in a checkpoint directory like checkpoints/epoch=000042")
                    })?,
                },
            },
            (None, None) => {
                anyhow::ensure!(
                    !self.allow_non_restored_state,
                    "--allow-non-restored-state goes with --from-savepoint or --from-checkpoint"
                );
                return Ok(None);
            }
        };
        Ok(Some(ExplicitRestore {
            from,
            allow_non_restored: self.allow_non_restored_state,
        }))
    }

    /// The restart strategy `--restart`, `--restart-attempts` and `--restart-delay` name.
    ///
    /// # Errors
    /// An unknown `--restart`.
    pub fn restart_strategy(&self) -> Result<RestartStrategy> {
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

/// Opens the checkpoints of `pipeline` under the state root `url`.
pub fn open_store(url: &str, pipeline: &str) -> Result<CheckpointStore> {
    let root = StateRoot::parse(url).with_context(|| format!("opening the state root `{url}`"))?;
    Ok(CheckpointStore::new(root, pipeline))
}

/// Splits `{root}/{pipeline}/{kind}/{name}` (a URL or a path with `/`) into its parts;
/// `None` for a bare name (a label or an epoch in the run's own state root).
fn split_state_url(value: &str, kind: &str) -> Result<Option<(String, String, String)>> {
    if !value.contains('/') {
        return Ok(None);
    }
    let trimmed = value.trim_end_matches('/');
    let parts: Vec<&str> = trimmed.rsplitn(4, '/').collect();
    match parts.as_slice() {
        [name, k, pipeline, root] if *k == kind && !root.is_empty() && !root.ends_with(':') => Ok(
            Some((root.to_string(), pipeline.to_string(), name.to_string())),
        ),
        [name, k, pipeline, root] if *k == kind => Ok(Some((
            format!("{root}/"),
            pipeline.to_string(),
            name.to_string(),
        ))),
        _ => anyhow::bail!(
            "`{value}` is not a {kind} location; write {{state root}}/{{pipeline}}/{kind}/{{name}}, e.g. file:///data/riffle-state/nexmark-q5/{kind}/{}",
            if kind == "savepoints" { "sp-000012" } else { "epoch=000042" }
        ),
    }
}

/// Prints how a run that stopped on request ended.
pub fn print_stopped(stopped: &Result<SavepointDone, String>, state: &str) {
    match stopped {
        Ok(done) => {
            eprintln!(
                "riffle: stopped with savepoint `{}` (epoch {}, {} files, {:.1} MiB, {} ms): {}",
                done.label,
                done.epoch,
                done.files,
                done.bytes as f64 / (1024.0 * 1024.0),
                done.duration_ms,
                done.location
            );
            eprintln!(
                "riffle: resume it with --from-savepoint {} --state {state} (any --parallelism)",
                done.label
            );
        }
        Err(e) => eprintln!(
            "riffle: stopped, but the savepoint failed: {e}; the newest checkpoint holds the state (a plain rerun resumes from it)"
        ),
    }
}

/// Waits for SIGINT or SIGTERM, then asks for a stop-with-savepoint; a second signal
/// exits at once (the next run resumes from the newest checkpoint).
pub async fn stop_on_signal(sender: SavepointSender) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    eprintln!("\nriffle: stopping with a savepoint… (signal again to stop at once, without one)");
    let request = sender.clone();
    tokio::spawn(async move {
        // The answer is printed from the run's outcome; a refusal only here.
        if let Err(e) = request_savepoint(&request, None, true, false).await {
            eprintln!("riffle: cannot stop with a savepoint: {e}");
        }
    });
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    eprintln!(
        "riffle: stopped without a savepoint; the next run resumes from the newest checkpoint"
    );
    std::process::exit(130);
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
    live: Arc<LiveMetrics>,
}

impl RunObserver for CliObserver {
    fn recovered(&mut self, recovered: &Recovered) {
        if let Some((what, check)) = &recovered.restored_from {
            eprintln!(
                "riffle: starting `{}` from {what}, registered as checkpoint epoch {}",
                self.pipeline,
                recovered.plan.restore.map_or(0, |e| e.0)
            );
            for op in &check.operators {
                eprintln!("    {:<24} {}", op.operator, op.fate);
            }
        }
        for (epoch, reason) in &recovered.plan.skipped {
            eprintln!("riffle: skipping checkpoint epoch {epoch}: {reason}");
        }
        for (sink, n) in &recovered.unpublished {
            eprintln!(
                "riffle: took back {n} file(s) that the skipped epochs published to `{sink}`; the replay writes them again"
            );
        }
        for (epoch, reason) in &recovered.replayed {
            eprintln!("riffle: not rolling PREPARED epoch {epoch} forward: {reason}");
        }
        let partial: Vec<u64> = recovered
            .plan
            .partial
            .iter()
            .filter(|e| !recovered.replayed.iter().any(|(r, _)| r == *e))
            .map(|e| e.0)
            .collect();
        if !partial.is_empty() {
            eprintln!("riffle: swept incomplete epoch(s) without a manifest: {partial:?}");
        }
        if recovered.recommitted > 0 {
            eprintln!(
                "riffle: rolled PREPARED epoch forward: re-committed {} sink transaction(s)",
                recovered.recommitted
            );
        }
        if recovered.aborted > 0 {
            eprintln!(
                "riffle: discarded {} staged output file(s) or transaction(s) of uncommitted epochs",
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
                // No watermark yet: some subtask had seen no event time at that checkpoint.
                let watermark = m.watermark.map_or("none yet".to_string(), event_time);
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
        self.live.set_job(metrics.clone());
        self.progress = Some(ProgressLine::start(
            metrics.clone(),
            self.total_events,
            self.force_progress,
            Some(self.status.clone()),
        ));
    }

    fn failed(&mut self, error: &RuntimeError, restart: Option<Restart>) {
        self.progress = None;
        match restart {
            Some(Restart {
                number,
                in_a_row,
                delay,
            }) => eprintln!(
                "riffle: job failed: {error}\nriffle: restart {number} from the newest checkpoint in {delay:?} (failure {in_a_row} in a row since a checkpoint last committed)"
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
        for (subtask, files) in subtasks {
            // One row per position: a Kafka source has one per partition.
            let mut rows = Vec::new();
            for batch in files.batches() {
                let batch = match batch {
                    Ok(batch) => batch,
                    Err(e) => {
                        rows.push(format!("(unreadable: {e})"));
                        continue;
                    }
                };
                for row in 0..batch.num_rows() {
                    let fields: Vec<String> = batch
                        .schema()
                        .fields()
                        .iter()
                        .enumerate()
                        .filter(|(_, f)| f.name() != KEY_GROUP_FIELD)
                        .map(|(i, f)| {
                            let value =
                                array_value_to_string(batch.column(i), row).unwrap_or_default();
                            format!("{}={value}", f.name())
                        })
                        .collect();
                    rows.push(fields.join(" "));
                }
            }
            out.push(format!("{id}[{subtask}] {}", rows.join(", ")));
        }
    }
    out
}

/// What `args` ask of a checkpointed run; `listeners` hear of its checkpoints.
///
/// # Errors
/// An unknown restart strategy.
pub fn checkpointed_run(
    args: &CheckpointArgs,
    restore_from: Option<ExplicitRestore>,
    listeners: Vec<Arc<dyn riffle_runtime::CheckpointListener>>,
) -> Result<CheckpointedRun> {
    Ok(CheckpointedRun {
        job: JobConfig {
            state_memory: args.state_memory()?,
            ..JobConfig::default()
        },
        restore_from,
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
        accept_replayed_output: args.accept_replayed_output,
        replace_output: args.replace_output,
        listeners,
    })
}

/// Runs `graph` with checkpoints as `args` say, restarting after failures.
pub fn run(
    runtime: &tokio::runtime::Runtime,
    graph: &JobGraph,
    args: &CheckpointArgs,
    total_events: Option<u64>,
    force_progress: bool,
) -> Result<CheckpointedOutcome> {
    let store = open_store(&args.state, &graph.name)?;
    let restore_from = args.explicit_restore(&store)?;
    if args.no_restore {
        eprintln!(
            "riffle: --no-restore: starting from empty state (existing checkpoints are kept)"
        );
    }
    let status = Arc::new(CheckpointStatus::default());
    let live = Arc::new(LiveMetrics::new(JobOutline::of(graph)));
    let (savepoints, requests) = savepoint_channel();
    let mut run = checkpointed_run(args, restore_from, vec![status.clone(), live.clone()])?;
    run.job.savepoints = Some(requests);
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
        live: live.clone(),
    };
    let outcome = runtime.block_on(async {
        // The control endpoint (`riffle savepoint create`) and signals ask for savepoints.
        let options = ControlOptions {
            address: args.http_address.unwrap_or(ControlOptions::default().address),
            tls: args.http_tls(None)?,
            plain_http_beyond_loopback: args.http_insecure,
            ..ControlOptions::default()
        };
        let control = match ControlServer::start_with(&store, &graph.name, savepoints.clone(), live, options).await {
            Ok(server) => {
                announce(&server, &store, &graph.name);
                Some(server)
            }
            // An address the user chose that cannot be served is an error, not a warning.
            Err(e) if args.http_address.is_some() => return Err(e.into()),
            Err(e) => {
                eprintln!("riffle: no control endpoint ({e}); `riffle savepoint create` cannot reach this run, signals still stop it with a savepoint");
                None
            }
        };
        let signals = tokio::spawn(stop_on_signal(savepoints));
        let outcome = riffle_runtime::run_checkpointed(graph, &store, run, &mut observer).await;
        signals.abort();
        if let Some(control) = control {
            control.stop().await;
        }
        Ok::<_, anyhow::Error>(outcome)
    })?;
    drop(observer.progress.take());
    Ok(outcome?)
}

/// Says where the control endpoint serves. The page's URL carries the token in its
/// fragment (which a browser never sends), so the page can take savepoints; this line is
/// the only place the token is printed.
fn announce(server: &ControlServer, store: &CheckpointStore, pipeline: &str) {
    eprintln!(
        "riffle: web page {}://{}/#token={} (Prometheus metrics at /metrics, REST API at /api/job)",
        server.scheme(),
        server.bound(),
        server.token()
    );
    if !server.bound().ip().is_loopback() {
        eprintln!(
            "riffle: open to the network: every request but the page itself needs `Authorization: Bearer` with the token in the URL above (also in `{pipeline}/_control_token` under {})",
            store.root_url()
        );
    }
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
    if !report.requests.is_empty() {
        // What a checkpoint costs on an object store that bills per request.
        let n = report.requests.len() as f64;
        let per = |phase: fn(&riffle_runtime::EpochRequests) -> u64| {
            report.requests.iter().map(phase).sum::<u64>() as f64 / n
        };
        eprintln!(
            "  object store     {:.1} requests per checkpoint: {:.1} writing state, {:.1} committing, {:.1} collecting garbage",
            per(|r| r.upload.requests() + r.commit.requests() + r.gc.requests()),
            per(|r| r.upload.requests()),
            per(|r| r.commit.requests()),
            per(|r| r.gc.requests()),
        );
    }
    for e in &report.errors {
        eprintln!("    failed: {e}");
    }
}
