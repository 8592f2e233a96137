//! One job on several worker processes (docs/cluster.md), started by the launcher (see
//! `cluster_by_hand.rs` for workers started one by one): the output equals a single
//! process's, through kill -9 of any worker and a resume on fewer workers, also from
//! state files a worker reused across checkpoints.

use crate::common;

use common::checkpoints::referenced_files;
use common::workers::{kill, kill_workers_randomly, launched, worker_pids};
use common::{published, riffle, stderr};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// q5 (keyed window aggregate, then a join on the window) and q8 (a window join of two
/// sources): every exchange kind crosses workers.
pub(crate) fn pipeline(query: &str, out: &Path) -> String {
    pipeline_at(query, out, "10K")
}

/// `pipeline` with Nexmark events at `rate` per second of event time.
pub(crate) fn pipeline_at(query: &str, out: &Path, rate: &str) -> String {
    let source = |event_type: &str| {
        format!(
            "CREATE TABLE {event_type} (WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND) \
             WITH ('connector' = 'nexmark', 'event_type' = '{event_type}', 'events' = '10M', 'rate' = '{rate}');\n"
        )
    };
    let sink = format!(
        "CREATE TABLE {query} WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');\n",
        out.display()
    );
    match query {
        "q5" => format!(
            "{}CREATE VIEW auction_counts AS
             SELECT auction, count(*) AS num, hop(INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS w
             FROM bid GROUP BY auction, w;
             {sink}
             INSERT INTO q5
             SELECT c.auction, c.w['start'] AS window_start, c.num
             FROM auction_counts c
             JOIN (SELECT w, max(num) AS max_num FROM auction_counts GROUP BY w) m
               ON c.w = m.w AND c.num = m.max_num;",
            source("bid")
        ),
        // Rows holding their 1 s window's highest price: a local stage on each source
        // subtask (not keyed, its rows all in key group 0), then a global one.
        "q7" => format!(
            "{}{sink}
             INSERT INTO q7
             SELECT B.auction, B.price, B.bidder, B.date_time
             FROM bid B
             JOIN (SELECT max(price) AS maxprice, window_end AS dt
                   FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '1' SECOND))
                   GROUP BY window_start, window_end) B1
             ON B.price = B1.maxprice
             WHERE B.date_time BETWEEN B1.dt - INTERVAL '1' SECOND AND B1.dt;",
            source("bid")
        ),
        // An unbounded GROUP BY whose output is append-only (each group once).
        "distinct" => format!(
            "{}{sink}
             INSERT INTO distinct SELECT DISTINCT bidder, auction FROM bid;",
            source("bid")
        ),
        "q8" => format!(
            "{}{}{sink}
             INSERT INTO q8
             SELECT p.id, p.name, p.w['start'] AS window_start
             FROM (SELECT id, name, tumble(INTERVAL '10' SECOND) AS w FROM person) p
             WHERE EXISTS (
               SELECT 1 FROM (SELECT seller, tumble(INTERVAL '10' SECOND) AS w FROM auction) a
               WHERE a.seller = p.id AND a.w = p.w);",
            source("person"),
            source("auction")
        ),
        other => panic!("no pipeline {other}"),
    }
}

/// `riffle run` of `query` over `events` events into `dir/out`, checkpointed into
/// `dir/state` every 50 ms, on `workers` worker processes (0: one process).
fn run(query: &str, dir: &Path, events: &str, parallelism: usize, workers: usize) -> Command {
    run_every("50ms", query, dir, events, parallelism, workers)
}

/// [`run`] with a checkpoint every `interval`.
fn run_every(
    interval: &str,
    query: &str,
    dir: &Path,
    events: &str,
    parallelism: usize,
    workers: usize,
) -> Command {
    let file = dir.join(format!("{query}.sql"));
    std::fs::write(&file, pipeline(query, &dir.join("out"))).unwrap();
    let mut cmd = riffle();
    cmd.arg("run")
        .arg(&file)
        .args(["--events", events, "-p", &parallelism.to_string()])
        .args(["--checkpoint-interval", interval, "--state"])
        .arg(dir.join("state"));
    if workers > 0 {
        cmd.args(["--workers", &workers.to_string()]);
    }
    cmd
}

fn finished(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    text
}

pub(crate) fn single_process(query: &str, events: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    finished(&mut run(query, dir.path(), events, 3, 0));
    let lines = published(&dir.path().join("out"));
    assert!(lines.len() > 10, "{query}: too few rows for a comparison");
    lines
}

/// Waits until q5 under `dir` has run 1.5 s and taken checkpoints; fails with the logs
/// in `dir` if none came in a minute.
pub(crate) fn wait_for_checkpoints(dir: &Path) {
    wait_for_checkpoints_of("q5", dir);
}

/// [`wait_for_checkpoints`] of `query`.
fn wait_for_checkpoints_of(query: &str, dir: &Path) {
    let started = Instant::now();
    while !dir.join(format!("state/{query}/checkpoints")).exists()
        || started.elapsed() < Duration::from_millis(1500)
    {
        if started.elapsed() > Duration::from_secs(60) {
            let mut logs = String::new();
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "log") {
                    logs += &format!("--- {}\n", path.display());
                    logs += &std::fs::read_to_string(&path).unwrap_or_default();
                }
            }
            panic!("no checkpoint in a minute:\n{logs}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Checkpoints the coordinator committed, from its report.
fn committed(text: &str) -> usize {
    text.lines()
        .find_map(|l| {
            let (_, rest) = l.split_once("checkpoints ")?;
            let (count, _) = rest.split_once(" committed,")?;
            count.trim().parse().ok()
        })
        .unwrap_or(0)
}

#[test]
fn q5_and_q8_on_three_workers_equal_one_process() {
    for query in ["q5", "q8"] {
        let expected = single_process(query, "300K");
        let dir = tempfile::tempdir().unwrap();
        let text = finished(run(query, dir.path(), "300K", 3, 3).args([
            "--throttle",
            "200K",
            "--progress",
        ]));
        assert!(text.contains("all 3 workers finished"), "{text}");
        // One progress line for the job, from every worker's control endpoint.
        assert!(text.contains("riffle: 3 workers · rows in "), "{text}");
        assert!(
            committed(&text) >= 3,
            "{query}: checkpoints across workers were not taken: {text}"
        );
        assert_eq!(published(&dir.path().join("out")), expected, "{query}");
    }
}

#[test]
fn kill_9_of_any_worker_at_random_moments_loses_and_repeats_nothing() {
    let expected = single_process("q5", "1200K");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("launcher.log");
    let mut cmd = run("q5", dir.path(), "1200K", 3, 3);
    cmd.args([
        "--throttle",
        "100K",
        "--restart-attempts",
        "20",
        "--restart-delay",
        "0s",
    ]);
    let mut launcher = launched(cmd, &log);
    let victims = kill_workers_randomly(&mut launcher, &log, 3, 10, 0x2545_f491_4f6c_dd1d);
    let status = launcher.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{text}");
    assert!(victims.contains(&0), "worker 0 was never killed");
    assert!(text.contains("starting it again"), "{text}");
    assert!(text.contains("rejoining the next one"), "{text}");
    assert_eq!(published(&dir.path().join("out")), expected);
}

/// The epoch `_latest.json` of q5 under `dir` names (0: none yet).
pub(crate) fn latest_epoch(dir: &Path) -> u64 {
    std::fs::read(dir.join("state/q5/_latest.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["epoch"].as_u64())
        .unwrap_or(0)
}

/// Waits up to 30 s for `ready`; else stops the job and fails with its log.
fn wait_until(
    launcher: &mut std::process::Child,
    log: &Path,
    what: &str,
    ready: impl Fn() -> bool,
) {
    let started = Instant::now();
    while !ready() {
        let ended = launcher.try_wait().unwrap().is_some();
        if ended || started.elapsed() > Duration::from_secs(30) {
            if !ended {
                // Its workers outlive a killed launcher (their own process groups).
                kill(launcher.id() as i32);
                for (_, pid) in worker_pids(log) {
                    kill(pid);
                }
                let _ = launcher.wait();
            }
            let text = std::fs::read_to_string(log).unwrap_or_default();
            panic!("waited 30 s for {what} (or the job ended):\n{text}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A job that runs for months loses a worker now and then. The restart budget counts
/// failures in a row, with no checkpoint committed between them: five kills, each once
/// the restarted worker's attempt committed a checkpoint, never use up two restarts
/// (the launcher once counted every restart over the job's life).
#[test]
fn worker_kills_between_committed_checkpoints_never_use_up_the_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("launcher.log");
    let mut cmd = run("q5", dir.path(), "10M", 3, 3);
    cmd.args(["--throttle", "100K", "--restart-attempts", "2"])
        .args(["--restart-delay", "0s"]);
    let mut launcher = launched(cmd, &log);
    for victim in [1, 0, 2, 1, 0] {
        // Every worker is up and a checkpoint committed with all of them.
        wait_until(&mut launcher, &log, "3 workers", || {
            worker_pids(&log).len() == 3
        });
        let joined = latest_epoch(dir.path());
        wait_until(&mut launcher, &log, "a checkpoint", || {
            latest_epoch(dir.path()) > joined
        });
        let pid = worker_pids(&log)[victim].1;
        kill(pid);
        wait_until(&mut launcher, &log, "a restarted worker", || {
            worker_pids(&log)[victim].1 != pid
        });
    }
    let joined = latest_epoch(dir.path());
    wait_until(&mut launcher, &log, "a checkpoint after the kills", || {
        latest_epoch(dir.path()) > joined
    });
    // As Ctrl-C would: stop the job with a savepoint.
    // SAFETY: signalling a process this test started.
    unsafe { libc::kill(launcher.id() as i32, libc::SIGTERM) };
    let status = launcher.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{text}");
    assert!(text.matches("starting it again").count() >= 5, "{text}");
}

/// Worker 1 killed as soon as it is up, again and again, with no checkpoint in the
/// job's life (one an hour): the third failure in a row is one more than two restarts
/// allow, and the job ends saying so.
#[test]
fn worker_kills_in_a_row_end_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("launcher.log");
    let mut cmd = run_every("1h", "q5", dir.path(), "10M", 3, 3);
    cmd.args(["--throttle", "100K", "--restart-attempts", "2"])
        .args(["--restart-delay", "0s"]);
    let mut launcher = launched(cmd, &log);
    let started = Instant::now();
    let mut kills = 0;
    let mut killed = None;
    let status = loop {
        if let Some(status) = launcher.try_wait().unwrap() {
            break status;
        }
        assert!(
            kills < 10 && started.elapsed() < Duration::from_secs(60),
            "the job outlived {kills} failures in a row"
        );
        let up = worker_pids(&log).into_iter().find(|(i, _)| *i == 1);
        if let Some((_, pid)) = up.filter(|(_, pid)| Some(*pid) != killed) {
            kill(pid);
            killed = Some(pid);
            kills += 1;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // The launcher that gave up stopped its workers itself.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "{text}");
    assert!(kills <= 3, "{kills} kills: {text}");
    assert!(text.contains("no restarts are left"), "{text}");
    assert_eq!(
        latest_epoch(dir.path()),
        0,
        "a checkpoint committed: {text}"
    );
}

/// Launches `query` on `workers` at `parallelism` (throttled, no restarts) into `dir` and
/// kills the whole job (launcher, then every worker) once checkpoints exist.
fn killed_after_checkpoints(
    query: &str,
    dir: &Path,
    events: &str,
    parallelism: usize,
    workers: usize,
) {
    let log = dir.join("launcher.log");
    let mut cmd = run(query, dir, events, parallelism, workers);
    cmd.args(["--throttle", "100K", "--restart", "none"]);
    let mut launcher = launched(cmd, &log);
    wait_for_checkpoints_of(query, dir);
    assert!(
        launcher.try_wait().unwrap().is_none(),
        "the job ended before it was killed"
    );
    kill(launcher.id() as i32);
    for (_, pid) in worker_pids(&log) {
        kill(pid);
    }
    let _ = launcher.wait();
}

#[test]
fn a_job_killed_on_three_workers_resumes_on_two() {
    let expected = single_process("q5", "600K");
    let dir = tempfile::tempdir().unwrap();
    killed_after_checkpoints("q5", dir.path(), "600K", 3, 3);
    let text = finished(&mut run("q5", dir.path(), "600K", 2, 2));
    assert!(text.contains("all 2 workers finished"), "{text}");
    // Each worker's summary says how long its restore took.
    assert_eq!(text.matches("  state restored   in ").count(), 2, "{text}");
    // Each worker holds its share of the state, not the whole checkpoint.
    let shares = restored_shares(&text);
    eprintln!("state shares on 2 workers, (held, checkpoint) bytes: {shares:?}");
    assert_eq!(shares.len(), 2, "{text}");
    for (worker, (held, total)) in &shares {
        assert!(
            *held < *total,
            "worker {worker} holds the whole checkpoint ({held} of {total} bytes): {text}"
        );
    }
    let held: u64 = shares.values().map(|(h, _)| h).sum();
    let total = shares.values().map(|(_, t)| *t).max().unwrap_or(0);
    assert!(
        held >= total,
        "the shares miss state ({held} of {total} bytes): {text}"
    );
    assert_eq!(published(&dir.path().join("out")), expected);
}

/// The local stage of a max-rows query writes all its rows in key group 0, on every
/// subtask. Resumed on workers at another parallelism, the new owner of key group 0
/// needs every old subtask's rows, not only the old owner's: until issue #47's stop 59
/// a worker read only the latter, and the rows of windows open at the kill were lost.
#[test]
fn a_stage_that_is_not_keyed_resumes_exactly_on_workers_at_another_parallelism() {
    let expected = single_process("q7", "300K");
    let dir = tempfile::tempdir().unwrap();
    // p4 → p2 on two workers: worker 0's new subtask 0 owns the key groups of old
    // subtasks 0 and 1 only, but old subtasks 2 and 3 hold key group 0 rows too.
    killed_after_checkpoints("q7", dir.path(), "300K", 4, 2);
    let text = finished(&mut run("q7", dir.path(), "300K", 2, 2));
    assert!(text.contains("all 2 workers finished"), "{text}");
    assert_eq!(published(&dir.path().join("out")), expected);
}

/// Each worker's state share at its first restore, from its log line (`restored` or,
/// on worker 0, `holds` N of the checkpoint's M state bytes): worker → (N, M).
fn restored_shares(text: &str) -> std::collections::BTreeMap<usize, (u64, u64)> {
    let mut shares = std::collections::BTreeMap::new();
    for line in text.lines() {
        let Some((_, rest)) = line.split_once("riffle: worker ") else {
            continue;
        };
        if !rest.contains(" state bytes (its share)") {
            continue;
        }
        let numbers: Vec<u64> = rest
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect();
        if let [worker, held, total, ..] = numbers[..] {
            shares.entry(worker as usize).or_insert((held, total));
        }
    }
    shares
}

/// q5 over 600K events on 3 workers at 100K events a second, launched into `dir` with
/// its log in `dir/launcher.log`, once it took checkpoints.
fn q5_on_three_workers(dir: &Path) -> (std::process::Child, std::path::PathBuf) {
    let log = dir.join("launcher.log");
    let mut cmd = run("q5", dir, "600K", 3, 3);
    cmd.args(["--throttle", "100K"]);
    let launcher = launched(cmd, &log);
    wait_for_checkpoints(dir);
    (launcher, log)
}

#[test]
fn a_savepoint_taken_on_three_workers_restores_on_two() {
    let expected = single_process("q5", "600K");
    let dir = tempfile::tempdir().unwrap();
    let (mut launcher, log) = q5_on_three_workers(dir.path());
    // As Ctrl-C would: the launcher asks worker 0 to stop the job with a savepoint.
    // SAFETY: signalling a process this test started.
    unsafe { libc::kill(launcher.id() as i32, libc::SIGTERM) };
    let status = launcher.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{text}");
    let label = text
        .lines()
        .find_map(|l| l.split("stopped with savepoint `").nth(1))
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no savepoint: {text}"))
        .to_string();
    let partial = published(&dir.path().join("out"));
    assert!(
        partial.len() < expected.len(),
        "the job was not stopped early"
    );
    let text = finished(run("q5", dir.path(), "600K", 2, 2).args(["--from-savepoint", &label]));
    assert!(text.contains("all 2 workers finished"), "{text}");
    assert_eq!(published(&dir.path().join("out")), expected);
}

/// One control surface per job: each worker serves its own control record, the job's
/// one token opens every worker's endpoint, a savepoint asked of worker 1 is taken by
/// worker 0's coordinator, and each worker's metrics say which worker they are.
#[test]
fn a_savepoint_asked_of_any_worker_stops_the_job_and_restores_exactly() {
    use common::http::request;
    let expected = single_process("q5", "600K");
    let dir = tempfile::tempdir().unwrap();
    let (mut launcher, log) = q5_on_three_workers(dir.path());
    let base = dir.path().join("state/q5");
    let record = |w: usize| base.join(format!("_control/worker-{w}.json"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(0..3).all(|w| record(w).exists()) {
        assert!(
            Instant::now() < deadline,
            "no control records: {:?}",
            std::fs::read_to_string(&log)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!base.join("_control.json").exists());
    let token = std::fs::read_to_string(base.join("_control_token")).unwrap();
    let address = |w: usize| {
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(record(w)).unwrap()).unwrap();
        assert_eq!(json["worker"], w, "{json}");
        json["address"].as_str().unwrap().to_string()
    };
    for w in 0..3 {
        let metrics = request(&address(w), "GET", "/metrics", Some(&token));
        assert_eq!(metrics.status, 200, "worker {w}: {}", metrics.body);
        assert!(
            metrics
                .body
                .contains(&format!("pipeline=\"q5\",worker=\"{w}\"")),
            "worker {w}: {}",
            metrics.body
        );
    }
    let refused = request(
        &address(2),
        "POST",
        "/api/savepoints?stop=true",
        Some("guess"),
    );
    assert_eq!(refused.status, 401, "{}", refused.body);
    let taken = request(
        &address(1),
        "POST",
        "/api/savepoints?stop=true&label=via-worker-1",
        Some(&token),
    );
    assert_eq!(taken.status, 200, "{}", taken.body);
    assert!(taken.body.contains("via-worker-1"), "{}", taken.body);
    let status = launcher.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{text}");
    assert!(
        (0..3).all(|w| !record(w).exists()),
        "a worker left its control record behind"
    );
    let partial = published(&dir.path().join("out"));
    assert!(
        partial.len() < expected.len(),
        "the job was not stopped early"
    );
    let text =
        finished(run("q5", dir.path(), "600K", 2, 2).args(["--from-savepoint", "via-worker-1"]));
    assert!(text.contains("all 2 workers finished"), "{text}");
    assert_eq!(published(&dir.path().join("out")), expected);
}

/// A worker paused (SIGSTOP) past the keep-alive timeout: the others fail the attempt
/// and start the next one; the paused worker, resumed, finds its streams gone, drops its
/// old attempt (whose streams the others refuse) and rejoins. The output stays exact.
#[test]
fn a_paused_worker_is_left_behind_and_rejoins_when_resumed() {
    let expected = single_process("q5", "600K");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("launcher.log");
    let mut cmd = run("q5", dir.path(), "600K", 3, 3);
    cmd.args(["--throttle", "100K", "--restart-delay", "0s"]);
    let mut launcher = launched(cmd, &log);
    wait_for_checkpoints(dir.path());
    let paused = worker_pids(&log)[1].1;
    // SAFETY: signalling a process this test started.
    unsafe { libc::kill(paused, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_secs(9));
    // SAFETY: as above.
    unsafe { libc::kill(paused, libc::SIGCONT) };
    let status = launcher.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{text}");
    assert!(
        text.contains("worker 1: attempt of generation 1 failed"),
        "the paused worker did not drop its attempt: {text}"
    );
    assert!(
        !text.contains("worker 1 exited"),
        "the paused worker was restarted instead of rejoining: {text}"
    );
    assert_eq!(published(&dir.path().join("out")), expected);
}

#[test]
fn a_worker_reuses_unchanged_state_files_and_a_resume_from_them_is_exact() {
    // At the V1 rate no 10 s window closes during the run, so the window join's buffers
    // only grow and each snapshot holds the batches of the one before.
    let q8 = |dir: &Path, workers: usize| {
        let file = dir.join("q8.sql");
        std::fs::write(&file, pipeline_at("q8", &dir.join("out"), "10M")).unwrap();
        let mut cmd = riffle();
        cmd.arg("run")
            .arg(&file)
            .args([
                "--events",
                "3M",
                "-p",
                "2",
                "--workers",
                &workers.to_string(),
            ])
            .args(["--checkpoint-interval", "20ms", "--retain-checkpoints", "2"])
            .args(["--restart", "none", "--state"])
            .arg(dir.join("state"));
        cmd
    };
    let reference = tempfile::tempdir().unwrap();
    finished(&mut q8(reference.path(), 1));
    let expected = published(&reference.path().join("out"));
    assert!(!expected.is_empty());

    let dir = tempfile::tempdir().unwrap();
    // Worker 0's coordinator stops at epoch 6; the launcher kills worker 1. Epochs follow
    // one another as fast as checkpoints commit, not every 20 ms: on a loaded machine
    // they took 200-700 ms, and the whole input passed in 5 epochs. Throttled, the input
    // lasts at least 15 s, and epoch 6 committed within 2 s under load. The resume runs
    // at full speed (the throttle is no part of the pipeline's state).
    let crashed = q8(dir.path(), 2)
        .args(["--throttle", "200K"])
        .env("RIFFLE_CRASH_AT", "after-latest-flip:6")
        .output()
        .unwrap();
    assert!(
        !crashed.status.success(),
        "the input ran dry before epoch 6: {}",
        stderr(&crashed)
    );
    let files = referenced_files(&dir.path().join("state/q8"));
    // At p2 on 2 workers, subtask 1 runs on worker 1.
    let reused_by_worker_1 = files.iter().filter(|f| f.subtask == 1 && f.reused);
    assert!(
        reused_by_worker_1.count() > 0,
        "worker 1 reused no file: {}",
        stderr(&crashed)
    );

    finished(&mut q8(dir.path(), 2));
    assert!(
        published(&dir.path().join("out")) == expected,
        "rows differ after resuming from files worker 1 reused"
    );
}

/// A worker's aggregate goes on from the state files it restored: the resumed run's
/// first checkpoint references them on both workers (writing only the groups new
/// since), also past a partial epoch recovery swept, and a second resume, from that
/// chain, is exact.
#[test]
fn after_a_resume_on_workers_the_aggregate_goes_on_from_the_files_it_restored() {
    let expected = single_process("distinct", "600K");
    let dir = tempfile::tempdir().unwrap();
    let run_on_workers = |crash_at: Option<&str>| {
        let mut cmd = run("distinct", dir.path(), "600K", 2, 2);
        cmd.args(["--retain-checkpoints", "50", "--restart", "none"]);
        if let Some(at) = crash_at {
            cmd.args(["--throttle", "100K"]).env("RIFFLE_CRASH_AT", at);
        }
        cmd
    };
    // Worker 0's coordinator stops once epoch 5's state is written, before its
    // manifest: the resume restores epoch 4 and, past the partial epoch 5, starts at 6.
    // Then the resumed run stops after its third commit.
    let crashed = run_on_workers(Some("after-snapshot-upload:5"))
        .output()
        .unwrap();
    assert!(!crashed.status.success(), "{}", stderr(&crashed));
    let state = dir.path().join("state/distinct");
    let before: std::collections::BTreeSet<u64> =
        referenced_files(&state).iter().map(|f| f.epoch).collect();
    let restored = *before.last().unwrap();
    let resumed_first = first_epoch_after(&state, restored);
    assert!(
        resumed_first > restored + 1,
        "no partial epoch after {restored}: {}",
        stderr(&crashed)
    );
    let at = format!("after-latest-flip:{}", resumed_first + 2);
    let crashed = run_on_workers(Some(&at)).output().unwrap();
    assert!(!crashed.status.success(), "{}", stderr(&crashed));
    let files = referenced_files(&state);
    for subtask in 0..2 {
        let continued = files.iter().filter(|f| {
            f.epoch == resumed_first && f.subtask == subtask && f.reused && f.operator != "bid"
        });
        assert!(
            continued.count() > 0,
            "epoch {resumed_first} references none of subtask {subtask}'s restored files: {}",
            stderr(&crashed)
        );
    }
    finished(&mut run_on_workers(None));
    assert_eq!(published(&dir.path().join("out")), expected);
}

/// The first epoch a run resumed from `restored` takes: one past every epoch directory
/// under `pipeline` (partial ones too).
fn first_epoch_after(pipeline: &Path, restored: u64) -> u64 {
    let newest = std::fs::read_dir(pipeline.join("checkpoints"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_prefix("epoch=")?.parse::<u64>().ok()
        })
        .max()
        .unwrap_or(restored);
    newest.max(restored) + 1
}
