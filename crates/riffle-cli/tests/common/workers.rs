//! Driving `riffle run --workers N`: its worker processes, and killing them.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The worker processes a launcher started, by index (the latest of each), from its
/// stderr so far.
pub fn worker_pids(log: &Path) -> Vec<(usize, i32)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut latest = std::collections::BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("riffle: worker ") else {
            continue;
        };
        let Some((index, pid)) = rest.split_once(" is process ") else {
            continue;
        };
        latest.insert(index.parse().unwrap(), pid.trim().parse().unwrap());
    }
    latest.into_iter().collect()
}

/// Starts `cmd` (a launcher) with its stderr in `log`.
pub fn launched(mut cmd: Command, log: &Path) -> Child {
    let file = std::fs::File::create(log).unwrap();
    cmd.stdout(Stdio::null()).stderr(file).spawn().unwrap()
}

/// SIGKILL to `pid`.
pub fn kill(pid: i32) {
    // SAFETY: sending a signal to a process the test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// Kills a worker of `launcher` (whose stderr is `log`) `kills` times, every 400 to
/// 1300 ms from a fixed pseudo-random sequence (`seed`); worker 0, the coordinator,
/// every third kill. Returns the victims, and fails if the job ended before its kills.
pub fn kill_workers_randomly(
    launcher: &mut Child,
    log: &Path,
    workers: usize,
    kills: usize,
    mut seed: u64,
) -> Vec<usize> {
    let mut next = move |bound: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % bound
    };
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut victims = Vec::new();
    while victims.len() < kills {
        assert!(Instant::now() < deadline, "no workers to kill: {log:?}");
        std::thread::sleep(Duration::from_millis(400 + next(900)));
        assert!(
            launcher.try_wait().unwrap().is_none(),
            "the job ended after {} kills: make the input bigger",
            victims.len()
        );
        let pids = worker_pids(log);
        if pids.len() < workers {
            continue;
        }
        let victim = if victims.len() % 3 == 0 {
            0
        } else {
            next(workers as u64) as usize
        };
        kill(pids[victim].1);
        victims.push(victim);
    }
    victims
}

/// A free port below Linux's ephemeral range (32768–60999), so that no outgoing
/// connection takes it between this choice and the worker's bind.
pub fn unused_port() -> u16 {
    use rand::{Rng, SeedableRng};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut rng = rand::rngs::StdRng::seed_from_u64(nanos ^ u64::from(std::process::id()));
    loop {
        let port: u16 = rng.random_range(20_000..32_000);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}
