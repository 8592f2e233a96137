//! `riffle worker`: one process of a job spread over several (docs/cluster.md), and
//! `riffle run --workers N`, which starts N of them on this machine.

use super::checkpointing::{
    checkpointed_run, open_store, print_report, print_stopped, stop_on_signal, CheckpointArgs,
};
use super::run::SqlArgs;
use anyhow::{Context, Result};
use riffle_cluster::protocol::JobSecret;
use riffle_cluster::tls::{ExchangeTls, TlsFiles};
use riffle_cluster::{run_worker, WorkerOptions};
use riffle_control::{ControlOptions, ControlServer, JobOutline, LiveMetrics};
use riffle_runtime::{JobMetrics, Placement, RunObserver};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `riffle worker`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Every worker runs the same file with the same options; worker 0 runs the checkpoint coordinator.\n\nExamples:\n  riffle worker q5.sql --checkpoint-interval 1s --state s3://bucket/riffle \\\n      --worker-id 1 --workers 10.0.0.1:7070,10.0.0.2:7070,10.0.0.3:7070\n  riffle worker q5.sql --checkpoint-interval 1s --state s3://bucket/riffle \\\n      --worker-id-from-hostname --workers riffle-0.riffle:7070,riffle-1.riffle:7070"
)]
pub struct WorkerArgs {
    /// The file and how to plan it (the same on every worker).
    #[command(flatten)]
    pub sql: SqlArgs,
    /// Checkpoints (required), the shared state root, restore options.
    #[command(flatten)]
    pub checkpoints: CheckpointArgs,
    /// This worker's index into --workers.
    #[arg(long, required_unless_present = "worker_id_from_hostname")]
    pub worker_id: Option<usize>,
    /// Take the index from the host name's trailing number, as a Kubernetes
    /// StatefulSet names its pods (`riffle-2` is worker 2).
    #[arg(long, conflicts_with = "worker_id")]
    pub worker_id_from_hostname: bool,
    /// Every worker's address, `host:port`, comma-separated, worker 0 first.
    #[arg(
        long,
        value_delimiter = ',',
        required = true,
        value_name = "HOST:PORT,…"
    )]
    pub workers: Vec<String>,
    /// Where this worker listens; by default every interface, on its own address's port.
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Option<SocketAddr>,
    /// How long to wait for another worker to answer before failing.
    #[arg(long, default_value = "60s", value_parser = crate::units::parse_duration)]
    pub peer_timeout: Duration,
    /// Threads that run this worker's tasks and streams; by default one per core this
    /// process may use. `riffle run --workers N` gives each worker an equal share of
    /// the machine's cores.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
    /// This worker's certificate chain (PEM) for mutual TLS on the exchange; it must
    /// name this worker's host in --workers. Also the control endpoint's certificate
    /// when --http-address is beyond loopback.
    #[arg(long, value_name = "FILE", requires_all = ["tls_key", "tls_ca"], required_unless_present = "insecure_exchange")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The certificate authority (PEM) that signed every worker's certificate: only
    /// workers holding one of its certificates may connect, or be connected to.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_ca: Option<PathBuf>,
    /// Plain TCP between workers, without TLS, for local development: anyone who can
    /// reach the port and read the job's state root can speak for a worker.
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key", "tls_ca"])]
    pub insecure_exchange: bool,
}

impl WorkerArgs {
    /// The exchange's TLS files (none with --insecure-exchange).
    fn tls_files(&self) -> Option<TlsFiles> {
        match (&self.tls_cert, &self.tls_key, &self.tls_ca) {
            (Some(cert), Some(key), Some(ca)) => Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                ca: ca.clone(),
            }),
            _ => None,
        }
    }
}

/// The worker index a StatefulSet pod's host name carries: `riffle-2` → 2.
fn ordinal_of(hostname: &str) -> Option<usize> {
    let name = hostname.trim().split('.').next()?;
    let (_, digits) = name.rsplit_once('-')?;
    digits.parse().ok()
}

/// The port of a `host:port` address.
fn port_of(address: &str) -> Option<u16> {
    address.rsplit_once(':')?.1.parse().ok()
}

pub fn run(args: WorkerArgs) -> Result<()> {
    anyhow::ensure!(
        args.checkpoints.enabled(),
        "a worker needs checkpoints: add --checkpoint-interval (e.g. 1s); a job on several workers is always exactly-once"
    );
    let worker = match args.worker_id {
        Some(id) => id,
        None => {
            let name = riffle_control::this_machine::host_name();
            ordinal_of(&name).with_context(|| {
                format!(
                    "--worker-id-from-hostname: the host name `{}` does not end in -<number>",
                    name.trim()
                )
            })?
        }
    };
    let workers = args.workers.len();
    anyhow::ensure!(
        worker < workers,
        "--worker-id {worker} is not an index into --workers ({workers} addresses)"
    );
    let listen = match args.listen {
        Some(listen) => listen,
        None => {
            let port = port_of(&args.workers[worker])
                .with_context(|| format!("--workers: `{}` has no port", args.workers[worker]))?;
            SocketAddr::from(([0, 0, 0, 0], port))
        }
    };
    let pipeline = args.sql.plan()?;
    let graph = &pipeline.graph;
    let store = open_store(&args.checkpoints.state, &graph.name)?;
    let restore_from = args.checkpoints.explicit_restore(&store)?;
    let live = Arc::new(LiveMetrics::new(JobOutline::of(graph)));
    let mut run = checkpointed_run(&args.checkpoints, restore_from, vec![live.clone()])?;
    let (savepoints, requests) = riffle_runtime::savepoint_channel();
    run.job.savepoints = Some(requests);
    let tls_files = args.tls_files();
    let tls = tls_files
        .as_ref()
        .map(ExchangeTls::from_files)
        .transpose()?;
    let http_address = args.checkpoints.http_address;
    // A worker's control endpoint beyond loopback serves HTTPS with its own certificate.
    let http_tls = args.checkpoints.http_tls(
        tls_files
            .as_ref()
            .filter(|_| http_address.is_some_and(|a| !a.ip().is_loopback()))
            .map(|f| (f.cert.as_path(), f.key.as_path())),
    )?;
    let mut options = WorkerOptions {
        placement: Placement { workers, worker },
        addresses: args.workers.clone(),
        listen,
        patience: args.peer_timeout,
        secret: JobSecret::new(String::new()),
        tls,
        savepoints: Some(savepoints.clone()),
    };
    eprintln!(
        "riffle: worker {worker} of {workers} running {} at parallelism {} (listening on {listen})",
        args.sql.file.display(),
        args.sql.parallelism
    );
    super::execute::print_budget_notice(&args.checkpoints, graph);
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = args.threads {
        runtime.worker_threads(usize::from(threads));
    }
    let runtime = runtime
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let outcome = runtime
        .block_on(async {
            // One secret per job, whichever worker stored it first.
            let candidate = riffle_control::access::new_token().map_err(anyhow::Error::msg)?;
            let secret = store
                .job_token(&candidate)
                .await
                .context("reading the job's secret from the state root")?;
            options.secret = JobSecret::new(secret);
            // Worker 0's coordinator takes savepoints; the others pass theirs on to it.
            let control_savepoints = match worker {
                0 => savepoints.clone(),
                _ => riffle_cluster::links::forward_savepoints(
                    options.addresses[0].clone(),
                    options.tls.clone(),
                    options.secret.clone(),
                    options.patience,
                ),
            };
            // The control endpoint, when asked for: Kubernetes probes its /health.
            let control = match http_address {
                Some(address) => {
                    let control_options = ControlOptions {
                        address,
                        worker: Some(worker),
                        tls: http_tls,
                        plain_http_beyond_loopback: args.checkpoints.http_insecure,
                        ..ControlOptions::default()
                    };
                    let server = ControlServer::start_with(
                        &store,
                        &graph.name,
                        control_savepoints,
                        live.clone(),
                        control_options,
                    )
                    .await?;
                    eprintln!(
                        "riffle: worker {worker}: control endpoint on {}://{address}",
                        server.scheme()
                    );
                    Some(server)
                }
                None => None,
            };
            // Worker 0 stops the job with a savepoint on SIGINT or SIGTERM; the others
            // run on until that savepoint stops their subtasks too.
            let signals = if worker == 0 {
                tokio::spawn(stop_on_signal(savepoints))
            } else {
                tokio::spawn(outlast_signals(worker))
            };
            let mut observer = LiveObserver(live);
            let outcome = run_worker(graph, &store, run, &options, &mut observer).await;
            signals.abort();
            if let Some(control) = control {
                control.stop().await;
            }
            Ok::<_, anyhow::Error>(outcome?)
        })
        .with_context(|| format!("worker {worker} failed"))?;
    let (sent_bytes, streams) = outcome.exchange;
    let finished = Finished {
        worker,
        generation: outcome.generation,
        rows_in: outcome.summary.source_rows,
        rows_out: outcome.summary.sink_rows,
        sent_bytes,
        streams: streams as u64,
    };
    eprintln!("{}", finished.line());
    super::execute::print_restore_time(&outcome.summary);
    if let Some(report) = &outcome.report {
        print_report(report);
        if let Some(stopped) = &report.stopped {
            print_stopped(stopped, &args.checkpoints.state);
        }
    }
    riffle_runtime::crash::maybe_pause_blocking("before-exit", riffle_core::Epoch(0));
    Ok(())
}

/// What a worker says in its last line, which the launcher and `riffle bench --workers`
/// read back from its stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    pub worker: usize,
    pub generation: u64,
    pub rows_in: u64,
    pub rows_out: u64,
    /// Bytes sent over exchange streams, and how many streams.
    pub sent_bytes: u64,
    pub streams: u64,
}

impl Finished {
    /// The line, as printed.
    pub fn line(&self) -> String {
        let Self {
            worker,
            generation,
            rows_in,
            rows_out,
            sent_bytes,
            streams,
        } = self;
        format!("riffle: worker {worker} finished (generation {generation}): rows in / out {rows_in} / {rows_out}; sent {sent_bytes} bytes over {streams} exchange streams")
    }

    /// The values of a [`line`](Self::line) (after any prefix); `None` for any other line.
    pub fn parse(line: &str) -> Option<Self> {
        let (_, rest) = line.split_once("riffle: worker ")?;
        if !rest.contains(" finished (generation ") {
            return None;
        }
        let numbers: Vec<u64> = rest
            .split(|c: char| !c.is_ascii_digit())
            .filter(|w| !w.is_empty())
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        let [worker, generation, rows_in, rows_out, sent_bytes, streams] = numbers[..] else {
            return None;
        };
        Some(Self {
            worker: usize::try_from(worker).ok()?,
            generation,
            rows_in,
            rows_out,
            sent_bytes,
            streams,
        })
    }
}

/// Shows each attempt's metrics on the worker's control endpoint.
struct LiveObserver(Arc<LiveMetrics>);

impl RunObserver for LiveObserver {
    fn started(&mut self, metrics: &Arc<JobMetrics>) {
        self.0.set_job(metrics.clone());
    }
}

/// A worker other than 0 takes SIGINT and SIGTERM as notice that worker 0 is stopping
/// the job with a savepoint (as Kubernetes signals every pod of a deleted StatefulSet),
/// and keeps running until that savepoint ends its subtasks.
async fn outlast_signals(worker: usize) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return;
    };
    loop {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        eprintln!("riffle: worker {worker}: signalled; worker 0 stops the job (with a savepoint)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workers_closing_line_reads_back_as_it_was_written() {
        let finished = Finished {
            worker: 2,
            generation: 3,
            rows_in: 45226,
            rows_out: 17,
            sent_bytes: 9,
            streams: 2,
        };
        assert_eq!(Finished::parse(&finished.line()), Some(finished));
        // Passed on by the launcher behind its progress line's clearing.
        assert_eq!(
            Finished::parse(&format!("\r\x1b[K{}", finished.line())),
            Some(finished)
        );
        assert_eq!(
            Finished::parse("riffle: worker 2 of 3 running q5.sql"),
            None
        );
    }

    #[test]
    fn a_statefulset_pod_name_gives_its_ordinal() {
        assert_eq!(ordinal_of("riffle-2"), Some(2));
        assert_eq!(
            ordinal_of("riffle-worker-10.riffle.default.svc\n"),
            Some(10)
        );
        assert_eq!(ordinal_of("laptop"), None);
        assert_eq!(ordinal_of("riffle-x"), None);
    }
}
