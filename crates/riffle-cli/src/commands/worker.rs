//! `riffle worker`: one process of a job spread over several (docs/cluster.md), and
//! `riffle run --workers N`, which starts N of them on this machine.

use super::checkpointing::{checkpointed_run, open_store, print_report, CheckpointArgs};
use super::run::SqlArgs;
use anyhow::{Context, Result};
use riffle_cluster::{run_worker, WorkerOptions};
use riffle_runtime::Placement;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::process::{Child, Command};
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
}

/// The worker index a StatefulSet pod's host name carries: `riffle-2` → 2.
fn ordinal_of(hostname: &str) -> Option<usize> {
    let name = hostname.trim().split('.').next()?;
    let (_, digits) = name.rsplit_once('-')?;
    digits.parse().ok()
}

fn hostname() -> Result<String> {
    if let Ok(name) = std::env::var("HOSTNAME") {
        return Ok(name);
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname").context("reading the host name")
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
            let name = hostname()?;
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
    let run = checkpointed_run(&args.checkpoints, restore_from, Vec::new())?;
    let options = WorkerOptions {
        placement: Placement { workers, worker },
        addresses: args.workers.clone(),
        listen,
        patience: args.peer_timeout,
    };
    eprintln!(
        "riffle: worker {worker} of {workers} running {} at parallelism {} (listening on {listen})",
        args.sql.file.display(),
        args.sql.parallelism
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let outcome = runtime
        .block_on(run_worker(graph, &store, run, &options, &mut ()))
        .with_context(|| format!("worker {worker} failed"))?;
    eprintln!(
        "riffle: worker {worker} finished (generation {}): rows in / out {} / {}",
        outcome.generation, outcome.summary.source_rows, outcome.summary.sink_rows
    );
    if let Some(report) = &outcome.report {
        print_report(report);
    }
    Ok(())
}

/// `riffle run … --workers N`: the same command as `riffle worker` for each of N
/// workers on 127.0.0.1, each on a free port.
fn worker_commands(run_args: &[OsString], workers: usize) -> Result<Vec<Vec<OsString>>> {
    let mut ports = Vec::new();
    let mut held = Vec::new();
    for _ in 0..workers {
        let socket = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
        ports.push(socket.local_addr()?.port());
        held.push(socket);
    }
    let addresses: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let shared = without_launcher_options(run_args);
    Ok((0..workers)
        .map(|i| {
            let mut command: Vec<OsString> = vec!["worker".into()];
            command.extend(shared.iter().cloned());
            command.extend([
                "--worker-id".into(),
                i.to_string().into(),
                "--workers".into(),
                addresses.join(",").into(),
                "--listen".into(),
                addresses[i].clone().into(),
            ]);
            command
        })
        .collect())
}

/// The arguments after `run`, less the launcher's own (`--workers N`, `--progress`).
fn without_launcher_options(run_args: &[OsString]) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut skip_next = false;
    for arg in run_args {
        if skip_next {
            skip_next = false;
            continue;
        }
        let text = arg.to_string_lossy();
        if text == "--workers" {
            skip_next = true;
        } else if text.starts_with("--workers=") || text == "--progress" {
        } else {
            out.push(arg.clone());
        }
    }
    out
}

/// Starts `workers` worker processes of this command and waits for them; when one
/// fails, stops the others and starts them all again (each attempt resumes from the
/// newest checkpoint), up to `restarts` times.
pub fn launch(workers: usize, restarts: u32) -> Result<()> {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let at = argv
        .iter()
        .position(|a| a == "run")
        .context("--workers is an option of `riffle run`")?;
    let exe = std::env::current_exe().context("finding the riffle executable")?;
    let mut attempt = 0;
    loop {
        let commands = worker_commands(&argv[at + 1..], workers)?;
        let mut children: Vec<Child> = Vec::new();
        for (i, command) in commands.iter().enumerate() {
            let child = Command::new(&exe)
                .args(command)
                .spawn()
                .context("starting a worker process")?;
            eprintln!("riffle: worker {i} is process {}", child.id());
            children.push(child);
        }
        let failed = wait_all(&mut children)?;
        match failed {
            None => {
                eprintln!("riffle: all {workers} workers finished");
                return Ok(());
            }
            Some((worker, status)) if attempt < restarts => {
                attempt += 1;
                eprintln!(
                    "riffle: worker {worker} exited ({status}); restarting all {workers} workers (restart {attempt} of {restarts})"
                );
            }
            Some((worker, status)) => {
                anyhow::bail!("worker {worker} exited ({status}) and no restarts are left")
            }
        }
    }
}

/// Waits until every worker ended, or one failed (then stops the rest): the failed one.
fn wait_all(children: &mut [Child]) -> Result<Option<(usize, std::process::ExitStatus)>> {
    let mut done = vec![false; children.len()];
    loop {
        for (i, child) in children.iter_mut().enumerate() {
            if done[i] {
                continue;
            }
            if let Some(status) = child.try_wait()? {
                done[i] = true;
                if !status.success() {
                    for other in children.iter_mut() {
                        let _ = other.kill();
                        let _ = other.wait();
                    }
                    return Ok(Some((i, status)));
                }
            }
        }
        if done.iter().all(|d| *d) {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn the_launcher_passes_everything_but_its_own_options() {
        let args: Vec<OsString> = [
            "q5.sql",
            "--workers",
            "3",
            "-p",
            "3",
            "--progress",
            "--workers=2",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        assert_eq!(
            without_launcher_options(&args),
            vec![OsString::from("q5.sql"), "-p".into(), "3".into()]
        );
        let commands = worker_commands(&args, 2).unwrap();
        assert_eq!(commands.len(), 2);
        assert_eq!(commands[1][0], "worker");
        let text: Vec<String> = commands[1]
            .iter()
            .map(|a| a.to_string_lossy().into())
            .collect();
        let id = text.iter().position(|a| a == "--worker-id").unwrap();
        assert_eq!(text[id + 1], "1");
    }
}
