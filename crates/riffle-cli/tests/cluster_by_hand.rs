//! Workers started one by one with `riffle worker`, as on separate machines, not by
//! the launcher: a cut connection, a worker stopped as it comes up. The output equals a
//! single process's.

use crate::cluster::{pipeline, single_process, wait_for_checkpoints};
use crate::common::workers::{launched, unused_port};
use crate::common::{published, riffle};
use std::path::Path;
use std::time::{Duration, Instant};

/// A TCP proxy on 127.0.0.1 in front of `target`, whose open connections the test can
/// cut at once (new ones keep being accepted).
struct CuttableProxy {
    port: u16,
    open: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl CuttableProxy {
    fn start(target: u16) -> Self {
        use std::net::{TcpListener, TcpStream};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let tracked = open.clone();
        std::thread::spawn(move || {
            for inbound in listener.incoming() {
                let Ok(inbound) = inbound else { continue };
                let Ok(outbound) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let pipe = |mut from: TcpStream, mut to: TcpStream| {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                };
                let mut list = tracked.lock().unwrap();
                list.push(inbound.try_clone().unwrap());
                list.push(outbound.try_clone().unwrap());
                pipe(inbound.try_clone().unwrap(), outbound.try_clone().unwrap());
                pipe(outbound, inbound);
            }
        });
        Self { port, open }
    }

    /// Closes every connection open now.
    fn cut(&self) -> usize {
        let mut open = self.open.lock().unwrap();
        for s in open.iter() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        let cut = open.len() / 2;
        open.clear();
        cut
    }
}

/// The connections into worker 1 pass through a proxy, which the test closes mid-run:
/// the attempt fails on every worker, the next one starts (through the proxy again),
/// and the output stays exact. No process is restarted.
#[test]
fn a_cut_exchange_connection_fails_the_attempt_and_the_job_resumes_exactly() {
    let expected = single_process("q5", "600K");
    let dir = tempfile::tempdir().unwrap();
    let file = q5_file(dir.path());
    let real = [unused_port(), unused_port(), unused_port()];
    let proxy = CuttableProxy::start(real[1]);
    let addresses = format!(
        "127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}",
        real[0], proxy.port, real[2]
    );
    let mut workers: Vec<_> = (0..3)
        .map(|i| worker(i, &file, &addresses, real[i], dir.path()))
        .collect();
    wait_for_checkpoints(dir.path());
    assert!(proxy.cut() > 0, "no connection went through the proxy");
    let logs = all_exit_well(&mut workers, Duration::from_secs(120));
    assert!(
        logs.contains("attempt of generation 1 failed"),
        "the cut went unnoticed: {logs}"
    );
    assert_eq!(published(&dir.path().join("out")), expected);
}

/// Writes q5 into `dir/q5.sql`, with its output in `dir/out`.
fn q5_file(dir: &Path) -> std::path::PathBuf {
    let file = dir.join("q5.sql");
    std::fs::write(&file, pipeline("q5", &dir.join("out"))).unwrap();
    file
}

/// `riffle worker` `i` of the q5 job in `file` on the workers at `addresses` (3, at
/// p3, 600K events at 100K a second), listening on `port`; its stderr goes to
/// `dir/worker-i.log`.
fn worker(i: usize, file: &Path, addresses: &str, port: u16, dir: &Path) -> Worker {
    let log = dir.join(format!("worker-{i}.log"));
    // Every worker gets the same files; the first call makes them.
    let tls_dir = dir.join("tls");
    if !tls_dir.join("worker.key").exists() {
        riffle_cluster::tls::WorkerCertificates::local(&tls_dir).unwrap();
    }
    let mut cmd = riffle();
    cmd.arg("worker")
        .arg(file)
        .args(["-p", "3", "--events", "600K", "--throttle", "100K"])
        .args(["--checkpoint-interval", "50ms", "--restart-delay", "0s"])
        .arg("--state")
        .arg(dir.join("state"))
        .args(["--worker-id", &i.to_string(), "--workers", addresses])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--tls-cert")
        .arg(tls_dir.join("worker.crt"))
        .arg("--tls-key")
        .arg(tls_dir.join("worker.key"))
        .arg("--tls-ca")
        .arg(tls_dir.join("ca.crt"));
    (launched(cmd, &log), log)
}

pub(crate) type Worker = (std::process::Child, std::path::PathBuf);

/// Every worker's log, one after another.
fn logs_of(workers: &[Worker]) -> String {
    workers
        .iter()
        .map(|(_, log)| std::fs::read_to_string(log).unwrap_or_default())
        .collect()
}

/// Kills `workers` and fails the test with `why` and their logs.
fn give_up(workers: &mut [Worker], why: &str) -> ! {
    for (child, _) in workers.iter_mut() {
        let _ = child.kill();
    }
    panic!("{why}:\n{}", logs_of(workers));
}

/// Waits for `workers` to exit well, for up to `limit`; returns their logs.
pub(crate) fn all_exit_well(workers: &mut [Worker], limit: Duration) -> String {
    let started = Instant::now();
    for i in 0..workers.len() {
        loop {
            if let Some(status) = workers[i].0.try_wait().unwrap() {
                if !status.success() {
                    give_up(workers, &format!("worker {i} failed"));
                }
                break;
            }
            if started.elapsed() > limit {
                give_up(workers, &format!("worker {i} still runs after {limit:?}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    logs_of(workers)
}

/// Worker 1 is stopped (SIGSTOP) as it comes up, before it opens any stream: worker 0's
/// attempt fails on the silent connection while worker 1's acks stream never arrived.
/// Worker 0 must still end that attempt and start the next (it once waited forever for
/// the coordinator, which waited for those acks); resumed, worker 1 joins, and the
/// output stays exact.
#[test]
fn an_attempt_that_fails_before_every_worker_joined_it_ends_and_the_next_runs() {
    let expected = single_process("q5", "600K");
    let dir = tempfile::tempdir().unwrap();
    let file = q5_file(dir.path());
    let ports = [unused_port(), unused_port(), unused_port()];
    let addresses = ports.map(|p| format!("127.0.0.1:{p}")).join(",");
    let late = worker(1, &file, &addresses, ports[1], dir.path());
    let up = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", ports[1])).is_err() {
        assert!(
            up.elapsed() < Duration::from_secs(60),
            "worker 1 never listened"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let stopped = late.0.id() as i32;
    // SAFETY: signalling a process this test started.
    unsafe { libc::kill(stopped, libc::SIGSTOP) };
    let mut workers = vec![
        worker(0, &file, &addresses, ports[0], dir.path()),
        late,
        worker(2, &file, &addresses, ports[2], dir.path()),
    ];
    // Past the keep-alive timeout: worker 0's streams into worker 1 fail.
    let log_0 = workers[0].1.clone();
    let failed = Instant::now();
    while !std::fs::read_to_string(&log_0)
        .unwrap_or_default()
        .contains("attempt of generation 1 failed")
    {
        if failed.elapsed() > Duration::from_secs(60) {
            give_up(&mut workers, "worker 0 did not end its first attempt");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: as above.
    unsafe { libc::kill(stopped, libc::SIGCONT) };
    all_exit_well(&mut workers, Duration::from_secs(120));
    assert_eq!(published(&dir.path().join("out")), expected);
}

/// A listener that takes connections and never answers: a worker 0 that is paused, or
/// this worker paused while its handshake's timer ran. Closed when dropped.
struct SilentListener {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SilentListener {
    fn on(port: u16) -> Self {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut held = Vec::new();
            while !stopped.load(Ordering::Relaxed) {
                if let Ok((connection, _)) = listener.accept() {
                    held.push(connection);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for SilentListener {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Worker 0's port first belongs to a listener that never finishes a handshake: the
/// other workers' first tries to agree on an attempt time out. That is not worker 0
/// gone (CI once saw worker 1, paused by the test above while its handshake's timer
/// ran, exit for good on it): they try again until worker 0 has been silent for the
/// whole `--peer-timeout`, and join once the real worker 0 comes up.
#[test]
fn a_handshake_with_worker_0_that_stalls_is_tried_again_not_taken_for_its_end() {
    let expected = single_process("q5", "600K");
    let dir = tempfile::tempdir().unwrap();
    let file = q5_file(dir.path());
    let ports = [unused_port(), unused_port(), unused_port()];
    let addresses = ports.map(|p| format!("127.0.0.1:{p}")).join(",");
    let silent = SilentListener::on(ports[0]);
    let mut workers = vec![
        worker(1, &file, &addresses, ports[1], dir.path()),
        worker(2, &file, &addresses, ports[2], dir.path()),
    ];
    let log_1 = workers[0].1.clone();
    let stalled = Instant::now();
    while !std::fs::read_to_string(&log_1)
        .unwrap_or_default()
        .contains("agreeing on the next attempt failed")
    {
        if stalled.elapsed() > Duration::from_secs(60) {
            give_up(
                &mut workers,
                "worker 1 never retried after the stalled handshake",
            );
        }
        if let Some(status) = workers[0].0.try_wait().unwrap() {
            give_up(&mut workers, &format!("worker 1 gave up: {status}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(silent);
    workers.insert(0, worker(0, &file, &addresses, ports[0], dir.path()));
    all_exit_well(&mut workers, Duration::from_secs(120));
    assert_eq!(published(&dir.path().join("out")), expected);
}
