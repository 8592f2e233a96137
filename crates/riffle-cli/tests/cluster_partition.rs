//! Workers on separate machines, as far as the network goes: each in its own network
//! namespace, joined by a bridge the test makes. A worker cut off for longer than the
//! exchange's keep-alive timeout, then reconnected, fails the attempt on every worker;
//! the job recovers by itself once the network heals, and the output equals one
//! process's. Needs `ip netns` (root, or CAP_NET_ADMIN); elsewhere it says so and
//! passes without running.

use crate::cluster::{latest_epoch, pipeline_at, single_process, wait_for_checkpoints};
use crate::cluster_by_hand::{all_exit_well, Worker};
use crate::common::workers::launched;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// What the test made: namespaces, their links into the bridge, the bridge.
struct Network {
    tag: String,
    workers: usize,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

impl Network {
    /// `workers` namespaces at 10.213.0.{1…} on one bridge.
    fn make(workers: usize) -> Result<Self, String> {
        let tag = format!("{}", std::process::id() % 100_000);
        let network = Self {
            tag: tag.clone(),
            workers,
        };
        let bridge = network.bridge();
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&["link", "set", &bridge, "up"])?;
        for i in 0..workers {
            let (ns, link) = (network.namespace(i), network.link(i));
            ip(&["netns", "add", &ns])?;
            ip(&[
                "link", "add", &link, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])?;
            ip(&["link", "set", &link, "master", &bridge])?;
            ip(&["link", "set", &link, "up"])?;
            let address = format!("{}/24", Self::address(i));
            ip(&[
                "netns", "exec", &ns, "ip", "addr", "add", &address, "dev", "eth0",
            ])?;
            ip(&["netns", "exec", &ns, "ip", "link", "set", "eth0", "up"])?;
            ip(&["netns", "exec", &ns, "ip", "link", "set", "lo", "up"])?;
        }
        Ok(network)
    }

    fn bridge(&self) -> String {
        format!("rfb{}", self.tag)
    }

    fn namespace(&self, i: usize) -> String {
        format!("riffle-{}-{i}", self.tag)
    }

    /// The bridge's end of worker `i`'s link (interface names have at most 15 bytes).
    fn link(&self, i: usize) -> String {
        format!("rfv{}w{i}", self.tag)
    }

    fn address(i: usize) -> String {
        format!("10.213.0.{}", i + 1)
    }

    /// Limits worker `i`'s link to `rate` (e.g. `20mbit`) with a token bucket whose
    /// queue holds 5 ms of it: what exceeds the rate waits, and what overflows the queue
    /// is dropped (TCP loses packets and sends them again). Fixed delay and random loss
    /// (`tc netem`) are not in every kernel.
    fn limit(&self, i: usize, rate: &str) -> Result<(), String> {
        let out = Command::new("tc")
            .args([
                "qdisc",
                "add",
                "dev",
                &self.link(i),
                "root",
                "tbf",
                "rate",
                rate,
            ])
            .args(["burst", "32kb", "latency", "5ms"])
            .output()
            .map_err(|e| e.to_string())?;
        match out.status.success() {
            true => Ok(()),
            false => Err(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        }
    }

    /// Packets the limit on worker `i`'s link dropped so far.
    fn dropped(&self, i: usize) -> u64 {
        let out = Command::new("tc")
            .args(["-s", "qdisc", "show", "dev", &self.link(i)])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        out.split("dropped ")
            .nth(1)
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// Cuts worker `i` off the network (`false`) or reconnects it (`true`).
    fn connect(&self, i: usize, up: bool) {
        let state = if up { "up" } else { "down" };
        ip(&["link", "set", &self.link(i), state]).unwrap();
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for i in 0..self.workers {
            let _ = ip(&["link", "del", &self.link(i)]);
            let _ = ip(&["netns", "del", &self.namespace(i)]);
        }
        let _ = ip(&["link", "del", &self.bridge()]);
    }
}

/// `riffle worker` `i` in its namespace: q5 over 3M events at 100K a second, p3.
fn worker(network: &Network, i: usize, file: &Path, dir: &Path) -> Worker {
    let addresses: Vec<String> = (0..network.workers)
        .map(|w| format!("{}:7070", Network::address(w)))
        .collect();
    let tls = dir.join("tls");
    let log = dir.join(format!("worker-{i}.log"));
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &network.namespace(i)])
        .arg(env!("CARGO_BIN_EXE_riffle"))
        .arg("worker")
        .arg(file)
        .args(["-p", "3", "--events", "3M", "--throttle", "100K"])
        .args(["--checkpoint-interval", "200ms", "--restart-delay", "0s"])
        .args(["--restart-attempts", "20", "--peer-timeout", "60s"])
        .arg("--state")
        .arg(dir.join("state"))
        .args([
            "--worker-id",
            &i.to_string(),
            "--workers",
            &addresses.join(","),
        ])
        .arg("--tls-cert")
        .arg(tls.join("worker.crt"))
        .arg("--tls-key")
        .arg(tls.join("worker.key"))
        .arg("--tls-ca")
        .arg(tls.join("ca.crt"));
    (launched(cmd, &log), log)
}

/// Cuts worker `victim` off for `outage`, reconnects it, and returns how long after
/// the reconnection the next checkpoint committed.
fn partition(network: &Network, dir: &Path, workers: &mut [Worker], victim: usize) -> Duration {
    let outage = Duration::from_secs(8);
    let before = latest_epoch(dir);
    network.connect(victim, false);
    std::thread::sleep(outage);
    network.connect(victim, true);
    let healed = Instant::now();
    while latest_epoch(dir) <= before {
        if healed.elapsed() > Duration::from_secs(120) {
            for (child, _) in workers.iter_mut() {
                let _ = child.kill();
            }
            panic!("no checkpoint committed within 120 s of the heal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    healed.elapsed()
}

#[test]
fn a_partitioned_worker_and_a_partitioned_worker_0_heal_and_the_output_stays_exact() {
    let network = match Network::make(3) {
        Ok(network) => network,
        Err(e) => {
            eprintln!("SKIPPED: no network namespaces here ({e}); the partition test needs `ip netns` (root or CAP_NET_ADMIN)");
            return;
        }
    };
    let expected = single_process("q5", "3M");
    let dir = tempfile::tempdir().unwrap();
    let hosts: Vec<String> = (0..3).map(Network::address).collect();
    riffle_cluster::tls::WorkerCertificates::create(&dir.path().join("tls"), &hosts).unwrap();
    let file = dir.path().join("q5.sql");
    std::fs::write(&file, pipeline_at("q5", &dir.path().join("out"), "10K")).unwrap();
    // Worker 2 sits behind a slow, lossy link for the whole run: backpressure crosses
    // it, and TCP sends again what its queue dropped.
    let lossy = match network.limit(2, "20mbit") {
        Ok(()) => true,
        Err(e) => {
            eprintln!("no rate limit on worker 2's link ({e}); the run goes on without it");
            false
        }
    };
    let mut workers: Vec<Worker> = (0..3)
        .map(|i| worker(&network, i, &file, dir.path()))
        .collect();
    wait_for_checkpoints(dir.path());
    let after_worker_1 = partition(&network, dir.path(), &mut workers, 1);
    let after_worker_0 = partition(&network, dir.path(), &mut workers, 0);
    eprintln!(
        "heal to next committed checkpoint: worker 1 cut off 8 s: {after_worker_1:?}; worker 0 cut off 8 s: {after_worker_0:?}"
    );
    let logs = all_exit_well(&mut workers, Duration::from_secs(240));
    let dropped = network.dropped(2);
    eprintln!("worker 2's 20 mbit link dropped {dropped} packets");
    assert!(
        !lossy || dropped > 0,
        "the lossy link lost nothing: the test checks no loss"
    );
    assert!(
        logs.matches("attempt of generation").count() >= 2,
        "the partitions went unnoticed: {logs}"
    );
    assert_eq!(crate::common::published(&dir.path().join("out")), expected);
}
