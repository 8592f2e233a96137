//! `riffle run … --workers N`: N worker processes (`riffle worker`) on this machine,
//! supervised: one that dies is started again (as the restart options allow), Ctrl-C asks worker 0 for a savepoint, and
//! one progress line and summary cover them all (docs/cluster.md).

mod worker_zero_lives;

use super::worker::Finished;
use anyhow::{Context, Result};
use riffle_cluster::tls::{TlsFiles, WorkerCertificates};
use riffle_core::Epoch;
use riffle_runtime::readout::human;
use riffle_runtime::supervisor::{RestartBudget, RestartStrategy};
use riffle_state::CheckpointStore;
use std::ffi::OsString;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use worker_zero_lives::WorkerZeroLives;

/// Where the launched workers listen: their exchange and control addresses.
struct Addresses {
    exchange: Vec<String>,
    control: Vec<String>,
}

/// `workers` × 2 free ports on 127.0.0.1 (held together while chosen, so all differ).
fn free_addresses(workers: usize) -> Result<Addresses> {
    let held = (0..workers * 2)
        .map(|i| unused_port(i as u64))
        .collect::<Result<Vec<_>>>()?;
    let mut addresses = held
        .iter()
        .map(|s| Ok(s.local_addr()?.to_string()))
        .collect::<Result<Vec<String>>>()?;
    let control = addresses.split_off(workers);
    Ok(Addresses {
        exchange: addresses,
        control,
    })
}

/// Ports the launcher picks for its workers: below Linux's ephemeral range
/// (32768–60999), from which the kernel hands out the local ports of outgoing
/// connections. A port picked there could be taken by a connection before the worker
/// binds it.
const LISTEN_PORTS: std::ops::Range<u64> = 20_000..32_000;

/// A listener on a free port of [`LISTEN_PORTS`] on 127.0.0.1, tried from a point that
/// differs per process and per `salt`.
fn unused_port(salt: u64) -> Result<std::net::TcpListener> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()));
    let span = LISTEN_PORTS.end - LISTEN_PORTS.start;
    let start = (u64::from(std::process::id()) * 7919 + nanos + salt * 104_729) % span;
    for step in 0..span {
        let port = LISTEN_PORTS.start + (start + step * 7) % span;
        if let Ok(socket) = std::net::TcpListener::bind(("127.0.0.1", port as u16)) {
            return Ok(socket);
        }
    }
    anyhow::bail!("no free port on 127.0.0.1 in {LISTEN_PORTS:?}")
}

/// Runtime threads for each of `workers` workers sharing `cores`: an equal share, at
/// least one. N workers that each started a thread per core would crowd the cores
/// (docs/cluster.md, "Speed").
fn threads_per_worker(cores: usize, workers: usize) -> usize {
    (cores / workers.max(1)).max(1)
}

/// `riffle run … --workers N`: the same command as `riffle worker` for each of N
/// workers, at `addresses`, each with `threads` runtime threads.
fn worker_commands(
    run_args: &[OsString],
    addresses: &Addresses,
    threads: usize,
    tls: &TlsFiles,
) -> Vec<Vec<OsString>> {
    let workers = addresses.exchange.len();
    let shared = without_launcher_options(run_args);
    (0..workers)
        .map(|i| {
            let mut command: Vec<OsString> = vec!["worker".into()];
            command.extend(shared.iter().cloned());
            command.extend([
                "--worker-id".into(),
                i.to_string().into(),
                "--workers".into(),
                addresses.exchange.join(",").into(),
                "--listen".into(),
                addresses.exchange[i].clone().into(),
                "--http-address".into(),
                addresses.control[i].clone().into(),
                "--threads".into(),
                threads.to_string().into(),
                "--tls-cert".into(),
                tls.cert.clone().into(),
                "--tls-key".into(),
                tls.key.clone().into(),
                "--tls-ca".into(),
                tls.ca.clone().into(),
            ]);
            command
        })
        .collect()
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

/// Removes the certificate directories of launchers that are gone (killed with -9, so
/// they could not remove their own): `riffle-tls-{pid}-…` whose pid no longer runs.
fn remove_orphaned_certificates(temp: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("riffle-tls-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !riffle_control::this_machine::process_alive(pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A directory removed with everything in it when this goes out of scope.
struct RemovedOnDrop(std::path::PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Set by SIGINT or SIGTERM in the launcher.
static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn request_stop(_: libc::c_int) {
    STOP_REQUESTED.store(true, Ordering::SeqCst);
}

/// What one worker's control endpoint says of its attempt (`/api/job`).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct WorkerProgress {
    source_rows: u64,
    sink_rows: u64,
    checkpoints: u64,
}

impl WorkerProgress {
    fn of(job: &serde_json::Value) -> Self {
        let count = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
        Self {
            source_rows: count(&job["source_rows"]),
            sink_rows: count(&job["sink_rows"]),
            checkpoints: count(&job["checkpoints"]["committed"]),
        }
    }
}

/// `GET /api/job` of the control endpoint at `address` (loopback: no token needed).
fn fetch_job(address: &str) -> Option<serde_json::Value> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let request = format!("GET /api/job HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (_, body) = response.split_once("\r\n\r\n")?;
    serde_json::from_str(body).ok()
}

/// The launcher's line over all workers: rows in and out, the rate, checkpoints.
fn progress_line(workers: &[WorkerProgress], rows_per_second: f64) -> String {
    let rows_in: u64 = workers.iter().map(|w| w.source_rows).sum();
    let rows_out: u64 = workers.iter().map(|w| w.sink_rows).sum();
    let checkpoints = workers.first().map_or(0, |w| w.checkpoints);
    format!(
        "riffle: {} workers · rows in {} ({}/s) · out {} · checkpoints {checkpoints}",
        workers.len(),
        human(rows_in as f64),
        human(rows_per_second),
        human(rows_out as f64),
    )
}

/// Draws [`progress_line`] every second on stderr until `done`.
fn draw_progress(control: Vec<String>, done: Arc<AtomicBool>) {
    let mut last_rows = 0u64;
    let mut last = std::time::Instant::now();
    while !done.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_secs(1));
        let workers: Vec<WorkerProgress> = control
            .iter()
            .map(|a| {
                fetch_job(a)
                    .map(|j| WorkerProgress::of(&j))
                    .unwrap_or_default()
            })
            .collect();
        let rows: u64 = workers.iter().map(|w| w.source_rows).sum();
        let rate = rows.saturating_sub(last_rows) as f64 / last.elapsed().as_secs_f64();
        (last_rows, last) = (rows, std::time::Instant::now());
        if !done.load(Ordering::SeqCst) {
            eprint!("\r\x1b[K{}", progress_line(&workers, rate));
        }
    }
}

/// One worker's place in the launcher.
enum Slot {
    /// Its process runs, and the thread passing on its stderr.
    Running(Child, Option<std::thread::JoinHandle<()>>),
    /// Its process died; another starts at this instant (the restart's delay).
    Restarting(Instant),
    /// Its process exited well.
    Finished,
}

/// The newest epoch committed in `store`, as its `_latest.json` says (`None`: none, or
/// unreadable: a failure is then taken to be in a row with the one before).
///
/// The launcher learns of commits from the state root, not from the workers: the root
/// is where a commit is decided, it answers while any worker (worker 0 with its
/// coordinator among them) is down, and one small read per worker failure costs
/// nothing. A worker's control endpoint counts only its current attempt's checkpoints,
/// and its stderr names none.
fn newest_committed(io: &tokio::runtime::Runtime, store: &CheckpointStore) -> Option<Epoch> {
    io.block_on(store.latest_hint())
}

/// Starts `workers` worker processes of this command and supervises them: a worker
/// that dies is started again (it rejoins the job's next attempt) as a
/// [`RestartBudget`] under `restart` allows, which learns of commits from `store`.
/// Ctrl-C (or SIGTERM) asks worker 0 to stop the job with a savepoint.
pub fn launch(
    workers: usize,
    restart: RestartStrategy,
    store: &CheckpointStore,
    force_progress: bool,
) -> Result<()> {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let at = argv
        .iter()
        .position(|a| a == "run")
        .context("--workers is an option of `riffle run`")?;
    let exe = std::env::current_exe().context("finding the riffle executable")?;
    let addresses = free_addresses(workers)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = threads_per_worker(cores, workers);
    // The workers' mutual TLS: a certificate authority and a certificate for
    // 127.0.0.1 made for this launch, in a directory only this user reads, removed
    // when the launcher ends.
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    remove_orphaned_certificates(&std::env::temp_dir());
    let tls_dir = std::env::temp_dir().join(format!("riffle-tls-{}-{started}", std::process::id()));
    // Created here, exclusively: a directory someone prepared under this name is refused.
    std::fs::create_dir(&tls_dir).with_context(|| {
        format!(
            "creating {} for the workers' certificates",
            tls_dir.display()
        )
    })?;
    let tls_dir = RemovedOnDrop(tls_dir);
    let tls = WorkerCertificates::local(&tls_dir.0)?.files;
    let commands = worker_commands(&argv[at + 1..], &addresses, threads, &tls);
    let io = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the launcher's runtime for reading the state root")?;
    // One progress line for all workers, as `riffle run` draws one for its process.
    use std::io::IsTerminal;
    let done = Arc::new(AtomicBool::new(false));
    let drawing = force_progress || std::io::stderr().is_terminal();
    if drawing {
        let (control, done) = (addresses.control.clone(), done.clone());
        std::thread::spawn(move || draw_progress(control, done));
    }
    // A worker's line clears the progress line first when one is drawn.
    let clear = if drawing { "\r\x1b[K" } else { "" };
    // SAFETY: the handler only stores into an atomic.
    unsafe {
        libc::signal(
            libc::SIGINT,
            request_stop as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGTERM,
            request_stop as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
    // Each worker's `finished` line of its current process, read from its stderr as it
    // is passed on: its rows in / out for the summary, its generation for
    // `WorkerZeroLives`.
    let finished = Arc::new(Mutex::new(vec![None::<Finished>; workers]));
    let spawn = |i: usize| -> Result<Slot> {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new(&exe)
            .args(&commands[i])
            // Its own process group: a terminal's Ctrl-C reaches the launcher only, which
            // asks worker 0 for the savepoint.
            .process_group(0)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .context("starting a worker process")?;
        eprintln!("riffle: worker {i} is process {}", child.id());
        let reader = child.stderr.take().map(|stderr| {
            let finished = finished.clone();
            std::thread::spawn(move || {
                use std::io::BufRead;
                for line in std::io::BufReader::new(stderr)
                    .lines()
                    .map_while(|l| l.ok())
                {
                    if let (Some(f), Ok(mut finished)) = (Finished::parse(&line), finished.lock()) {
                        finished[i] = Some(f);
                    }
                    eprintln!("{clear}{line}");
                }
            })
        });
        Ok(Slot::Running(child, reader))
    };
    let mut lives = WorkerZeroLives::new(workers);
    let start = |i: usize, lives: &mut WorkerZeroLives| {
        lives.started(i);
        if let Ok(mut finished) = finished.lock() {
            finished[i] = None;
        }
        spawn(i)
    };
    let mut slots = (0..workers)
        .map(|i| start(i, &mut lives))
        .collect::<Result<Vec<_>>>()?;
    let mut budget = RestartBudget::new(restart);
    let mut stop_sent = false;
    loop {
        if STOP_REQUESTED.load(Ordering::SeqCst) && !stop_sent {
            stop_sent = true;
            if let Slot::Running(child, _) = &slots[0] {
                // SAFETY: signalling our own child.
                unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            }
        }
        for i in 0..workers {
            let status = match &mut slots[i] {
                Slot::Finished => continue,
                Slot::Restarting(at) => {
                    if Instant::now() >= *at {
                        slots[i] = start(i, &mut lives)?;
                    }
                    continue;
                }
                Slot::Running(child, reader) => match child.try_wait()? {
                    None => continue,
                    Some(status) => {
                        // Its last lines (`finished`) are read once its stderr closed;
                        // a process it left behind may hold the pipe open, so the wait
                        // is short rather than a join that could stall supervision.
                        if let Some(reader) = reader.take() {
                            let until = Instant::now() + Duration::from_secs(1);
                            while !reader.is_finished() && Instant::now() < until {
                                std::thread::sleep(Duration::from_millis(5));
                            }
                        }
                        status
                    }
                },
            };
            if status.success() {
                let generation = finished
                    .lock()
                    .ok()
                    .and_then(|f| f[i])
                    .map(|f| f.generation);
                slots[i] = match lives.heard_a_void_end(i, generation) {
                    true => {
                        eprintln!("riffle: worker {i} exited after hearing the job end from a worker 0 that died since; starting it again");
                        start(i, &mut lives)?
                    }
                    false => Slot::Finished,
                };
                continue;
            }
            // A job being stopped with a savepoint is not restarted.
            let restart = match stop_sent {
                true => None,
                false => budget.failed(newest_committed(&io, store)),
            };
            let Some(restart) = restart else {
                done.store(true, Ordering::SeqCst);
                for slot in &mut slots {
                    if let Slot::Running(child, _) = slot {
                        let _ = child.kill();
                        let _ = child.wait();
                    }
                }
                anyhow::bail!(
                    "worker {i} exited ({status}) and no restarts are left ({} failures in a row with no checkpoint committed between them; --restart-attempts counts those)",
                    budget.in_a_row()
                );
            };
            eprintln!(
                "riffle: worker {i} exited ({status}); starting it again in {:?} (restart {}, failure {} in a row since a checkpoint last committed)",
                restart.delay, restart.number, restart.in_a_row
            );
            slots[i] = Slot::Restarting(Instant::now() + restart.delay);
            if i == 0 {
                // Worker 0 died before the job finished, so the job resumes from a
                // checkpoint that needs every worker: one that had heard the job
                // end (just before worker 0 died) runs again too, now or, if it is
                // still on its way out, when it exits (`worker_zero_lives.rs`).
                lives.worker_0_died(io.block_on(store.newest_generation()).ok().flatten());
                for (j, slot) in slots.iter_mut().enumerate().skip(1) {
                    if matches!(slot, Slot::Finished) {
                        *slot = start(j, &mut lives)?;
                    }
                }
            }
        }
        if slots.iter().all(|s| matches!(s, Slot::Finished)) {
            done.store(true, Ordering::SeqCst);
            // Let the stderr threads pass on the workers' last lines first.
            std::thread::sleep(Duration::from_millis(100));
            let (rows_in, rows_out) = finished
                .lock()
                .map(|f| {
                    (f.iter().flatten()).fold((0, 0), |(a, b), f| (a + f.rows_in, b + f.rows_out))
                })
                .unwrap_or_default();
            eprintln!(
                "riffle: all {workers} workers finished ({} restarts): rows in / out {rows_in} / {rows_out}",
                budget.restarts()
            );
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_line_adds_up_the_workers() {
        let job = |rows: u64, out: u64, checkpoints: u64| {
            WorkerProgress::of(&serde_json::json!({
                "source_rows": rows, "sink_rows": out,
                "checkpoints": {"committed": checkpoints},
            }))
        };
        let line = progress_line(&[job(1_000_000, 3, 7), job(500_000, 2, 0)], 2e6);
        assert_eq!(
            line,
            format!(
                "riffle: 2 workers · rows in {} ({}/s) · out {} · checkpoints 7",
                human(1.5e6),
                human(2e6),
                human(5.0)
            )
        );
        // A worker that does not answer (restarting) counts nothing.
        assert_eq!(
            WorkerProgress::of(&serde_json::Value::Null),
            WorkerProgress::default()
        );
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
        let tls = TlsFiles {
            cert: "w.crt".into(),
            key: "w.key".into(),
            ca: "ca.crt".into(),
        };
        let commands = worker_commands(&args, &free_addresses(2).unwrap(), 3, &tls);
        assert_eq!(commands.len(), 2);
        assert_eq!(commands[1][0], "worker");
        let text: Vec<String> = commands[1]
            .iter()
            .map(|a| a.to_string_lossy().into())
            .collect();
        let id = text.iter().position(|a| a == "--worker-id").unwrap();
        assert_eq!(text[id + 1], "1");
        // Each worker serves its control endpoint, which the progress line asks.
        let control = text.iter().position(|a| a == "--http-address").unwrap();
        assert!(text[control + 1].starts_with("127.0.0.1:"));
        let threads = text.iter().position(|a| a == "--threads").unwrap();
        assert_eq!(text[threads + 1], "3");
        // The workers speak mutual TLS with the launcher's certificates.
        let ca = text.iter().position(|a| a == "--tls-ca").unwrap();
        assert_eq!(text[ca + 1], "ca.crt");
        assert!(!text.iter().any(|a| a == "--insecure-exchange"));
    }

    #[test]
    fn workers_on_one_machine_share_its_cores() {
        assert_eq!(threads_per_worker(8, 2), 4);
        assert_eq!(threads_per_worker(2, 2), 1);
        assert_eq!(threads_per_worker(8, 3), 2);
        // More workers than cores: each still has a thread.
        assert_eq!(threads_per_worker(2, 3), 1);
        assert_eq!(threads_per_worker(1, 1), 1);
    }
}
