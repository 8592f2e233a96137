//! Two processes on one state root (docs/engine.md, "Fencing"): started at the same
//! moment, or an old one stalled at the worst step while a new one takes over. Either
//! way one of them is fenced with a clear message, the other finishes, and the output
//! equals an uninterrupted run's.

use crate::common;

use common::savepoints::{ok, reference};
use common::{published_lines, riffle, stderr};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// q5 over 2M events at parallelism 2, checkpointed every 100 ms, slowed to 1M
/// events/s (about 2 s of work), restarted after failures as by default.
fn q5(out: &Path, state: &Path) -> Command {
    let mut cmd = riffle();
    cmd.args([
        "nexmark", "--query", "q5", "--events", "2M", "--rate", "10K",
    ])
    .args(["--parallelism", "2", "--throttle", "1M", "--output"])
    .arg(out)
    .args([
        "--checkpoint-interval",
        "100ms",
        "--restart-delay",
        "100ms",
        "--state",
    ])
    .arg(state);
    cmd
}

fn spawn(mut cmd: Command) -> Child {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A run that failed must have been fenced (and said so), never anything else.
fn fenced_or_finished(output: &Output, who: &str) -> bool {
    let text = stderr(output);
    if output.status.success() {
        return true;
    }
    assert!(
        text.contains("fenced") && text.contains("does not restart"),
        "{who} failed without being fenced:\n{text}"
    );
    false
}

/// No checkpoint of the state root is damaged.
fn verified(state: &Path) {
    let out = ok(riffle()
        .args([
            "checkpoints",
            "verify",
            "--pipeline",
            "nexmark-q5",
            "--state",
        ])
        .arg(state));
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!report.contains("DAMAGED"), "{report}");
}

#[test]
fn two_processes_started_at_once_on_one_state_root_give_exact_output() {
    let dir = tempfile::tempdir().unwrap();
    let expected = reference("q5", dir.path());
    for attempt in 0..3 {
        let out = dir.path().join(format!("out-{attempt}"));
        let state = dir.path().join(format!("state-{attempt}"));
        // Both read the claims, then wait, then claim: a claim that is not a
        // conditional create gives both the same generation.
        let racing = || {
            let mut cmd = q5(&out, &state);
            cmd.env("RIFFLE_PAUSE_AT", "before-claim:0:400");
            spawn(cmd)
        };
        let (a, b) = (racing(), racing());
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        // A fenced process may leave a staged `.inprogress` file of its own generation
        // behind (it must not delete it: a newer run may be rolling its PREPARED epoch
        // forward from it); it is not output, and the next recovery discards it.
        let finished = [
            fenced_or_finished(&a, "the first"),
            fenced_or_finished(&b, "the second"),
        ];
        eprintln!("attempt {attempt}: finished (first, second) = {finished:?}");
        assert!(
            finished.contains(&true),
            "attempt {attempt}: neither finished:\n{}\n{}",
            stderr(&a),
            stderr(&b)
        );
        assert_eq!(
            published_lines(&out),
            expected,
            "attempt {attempt}: output differs"
        );
        verified(&state);
    }
}

/// Waits until `state` holds a committed checkpoint of q5.
fn wait_for_checkpoint(state: &Path) {
    let latest = state.join("nexmark-q5/_latest.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !latest.exists() {
        assert!(Instant::now() < deadline, "no checkpoint within 60 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The old process stalls right after a fencing check (`RIFFLE_PAUSE_AT`), a new one
/// recovers and runs to the end meanwhile, then the old one resumes: it must publish
/// nothing, overwrite nothing and collect nothing, and stop fenced (not restart).
#[test]
fn a_stalled_process_that_resumes_after_a_newer_one_took_over_is_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let expected = reference("q5", dir.path());
    for step in ["after-generation-check", "after-prepared-check"] {
        let out = dir.path().join(format!("out-{step}"));
        let state = dir.path().join(format!("state-{step}"));
        // Stalls at epoch 3 for 8 s: long enough for the whole second run.
        let mut old = q5(&out, &state);
        old.env("RIFFLE_PAUSE_AT", format!("{step}:3:8000"));
        let old = spawn(old);
        wait_for_checkpoint(&state);
        std::thread::sleep(Duration::from_millis(300)); // at epoch 3 by now
        let new = q5(&out, &state).output().unwrap();
        assert!(
            new.status.success(),
            "{step}: the newer run failed:\n{}",
            stderr(&new)
        );
        let old = old.wait_with_output().unwrap();
        let text = stderr(&old);
        assert!(
            !old.status.success() && text.contains("fenced") && !text.contains("riffle: restart "),
            "{step}: the stalled run must stop fenced:\n{text}"
        );
        assert_eq!(published_lines(&out), expected, "{step}: output differs");
        // The newer run's checkpoints are intact: a rerun resumes from its end-of-input
        // checkpoint and publishes nothing new.
        let rerun = q5(&out, &state).output().unwrap();
        assert!(
            rerun.status.success(),
            "{step}: rerun failed:\n{}",
            stderr(&rerun)
        );
        assert_eq!(
            published_lines(&out),
            expected,
            "{step}: the rerun published again"
        );
    }
}
