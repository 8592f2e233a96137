//! Exactly-once output across crashes (DESIGN §8): a run aborted at each step of the
//! commit protocol, or killed at random moments, and then resumed, publishes exactly the
//! rows of a run that never crashed.

mod common;

use common::{published, stderr};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const CRASH_POINTS: [&str; 5] = [
    "after-snapshot-upload",
    "after-manifest-prepared",
    "after-sink-commit",
    "after-manifest-committed",
    "after-latest-flip",
];

fn riffle() -> Command {
    Command::new(env!("CARGO_BIN_EXE_riffle"))
}

/// `riffle nexmark` writing JSONL into `out`; with `state`, checkpointed every 30 ms.
fn nexmark(
    query: &str,
    events: &str,
    parallelism: usize,
    out: &Path,
    state: Option<&Path>,
) -> Command {
    let mut cmd = riffle();
    cmd.args([
        "nexmark", "--query", query, "--events", events, "--rate", "10K",
    ])
    .args([
        "--parallelism",
        &parallelism.to_string(),
        "--restart",
        "none",
    ])
    .arg("--output")
    .arg(out);
    if let Some(state) = state {
        cmd.args(["--checkpoint-interval", "30ms", "--state"])
            .arg(state);
    }
    cmd
}

fn crash_free(query: &str, events: &str, parallelism: usize) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let result = nexmark(query, events, parallelism, &out, None)
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", stderr(&result));
    let lines = published(&out);
    assert!(
        !lines.is_empty(),
        "{query} produced no rows: a vacuous comparison"
    );
    lines
}

/// For every crash point: abort the run there at epoch 2, resume it, and compare.
fn every_crash_point(query: &str, events: &str) {
    for parallelism in [1, 2] {
        let expected = crash_free(query, events, parallelism);
        for point in CRASH_POINTS {
            let dir = tempfile::tempdir().unwrap();
            let (out, state) = (dir.path().join("out"), dir.path().join("state"));
            let crashed = nexmark(query, events, parallelism, &out, Some(&state))
                .env("RIFFLE_CRASH_AT", format!("{point}:2"))
                .output()
                .unwrap();
            let text = stderr(&crashed);
            assert!(
                !crashed.status.success() && text.contains("RIFFLE_CRASH_AT: crashing"),
                "{query} p{parallelism} did not crash at {point}:2: {text}"
            );
            let resumed = nexmark(query, events, parallelism, &out, Some(&state))
                .output()
                .unwrap();
            let text = stderr(&resumed);
            assert!(resumed.status.success(), "{text}");
            assert!(
                text.contains("resuming"),
                "{point}: nothing to resume from: {text}"
            );
            let got = published(&out);
            assert_eq!(
                got.len(),
                expected.len(),
                "{query} p{parallelism} crashed {point}: row count differs"
            );
            assert!(
                got == expected,
                "{query} p{parallelism} crashed {point}: rows differ"
            );
        }
    }
}

#[test]
fn q5_output_is_exact_after_a_crash_at_every_protocol_step() {
    every_crash_point("q5", "1M");
}

#[test]
fn q7_output_is_exact_after_a_crash_at_every_protocol_step() {
    every_crash_point("q7", "2M");
}

#[test]
fn q8_output_is_exact_after_a_crash_at_every_protocol_step() {
    every_crash_point("q8", "2M");
}

/// A deterministic xorshift generator: the kill times come from a printed seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn random_kills_lose_and_duplicate_nothing() {
    let (query, events, parallelism) = ("q5", "3M", 2);
    let expected = crash_free(query, events, parallelism);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("kill schedule seed {seed}");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    let mut kills = 0;
    let mut finished_early = 0;
    while kills < 20 {
        let mut child = nexmark(query, events, parallelism, &out, Some(&state))
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_millis(100 + rng.below(500));
        while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(5));
        }
        if child.try_wait().unwrap().is_some() {
            // The run completed before its kill time: start over on fresh directories
            // would hide nothing, so just count it and keep killing resumed runs.
            finished_early += 1;
            assert!(finished_early < 50, "runs end too fast to be killed");
            continue;
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
    }
    let last = nexmark(query, events, parallelism, &out, Some(&state))
        .output()
        .unwrap();
    assert!(last.status.success(), "{}", stderr(&last));
    let got = published(&out);
    assert_eq!(got.len(), expected.len(), "seed {seed}: row count differs");
    assert!(
        got == expected,
        "seed {seed}: rows differ after {kills} kills"
    );
}
