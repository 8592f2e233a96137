//! Worker 0 killed at the very end of a job on workers (docs/cluster.md, "Failures"):
//! the others have heard the end from it and are on their way out, and the job resumes
//! from its last checkpoint, which needs every worker. The launcher must start again
//! each worker that heard that end, also one that exits a moment after worker 0 died;
//! it once left such a worker finished, and the restarted worker 0 waited a minute per
//! attempt for it (the DuckDB oracle's seed 1031 on workers, once in about ten runs).

use crate::cluster::{pipeline, single_process};
use crate::common;

use common::workers::{kill, launched, worker_pids};
use common::{published, riffle};
use std::time::{Duration, Instant};

/// A case that waited for the missing worker takes four minutes or more.
const PROMPTLY: Duration = Duration::from_secs(40);

#[test]
fn worker_0_killed_as_the_job_ends_leaves_no_worker_behind_and_the_output_exact() {
    let expected = single_process("q5", "300K");
    for round in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("q5.sql");
        std::fs::write(&file, pipeline("q5", &dir.path().join("out"))).unwrap();
        let log = dir.path().join("launcher.log");
        let mut cmd = riffle();
        cmd.arg("run")
            .arg(&file)
            .args(["--events", "300K", "-p", "2", "--workers", "2"])
            .args([
                "--checkpoint-interval",
                "50ms",
                "--restart-delay",
                "0s",
                "--state",
            ])
            .arg(dir.path().join("state"))
            // Every worker waits 1.5 s after its `finished` line before it exits: worker
            // 0 is killed in that time, and worker 1, which heard the end from it,
            // exits after its death.
            .env("RIFFLE_PAUSE_AT", "before-exit:0:1500");
        let started = Instant::now();
        let mut launcher = launched(cmd, &log);
        let text = || std::fs::read_to_string(&log).unwrap_or_default();
        while !text().contains("riffle: worker 0 finished (generation") {
            assert!(
                launcher.try_wait().unwrap().is_none() && started.elapsed() < PROMPTLY,
                "round {round}: worker 0 never finished:\n{}",
                text()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        kill(worker_pids(&log)[0].1);
        let status = loop {
            if let Some(status) = launcher.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > PROMPTLY {
                kill(launcher.id() as i32);
                for (_, pid) in worker_pids(&log) {
                    kill(pid);
                }
                let _ = launcher.wait();
                panic!(
                    "round {round}: still running after {PROMPTLY:?}:\n{}",
                    text()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let text = text();
        assert!(status.success(), "round {round}:\n{text}");
        let restarted = "worker 1 exited after hearing the job end from a worker 0 that died since";
        assert!(
            text.contains("worker 0 exited (signal: 9"),
            "round {round}:\n{text}"
        );
        assert!(text.contains(restarted), "round {round}:\n{text}");
        let got = published(&dir.path().join("out"));
        assert_eq!(got, expected, "round {round}: output differs:\n{text}");
    }
}
