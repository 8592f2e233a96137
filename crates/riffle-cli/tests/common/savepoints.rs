//! Jobs and commands the savepoint tests share: a slowed-down Nexmark run to stop, its
//! uninterrupted reference, and `riffle savepoint` invocations.

use super::{nexmark_run, published, riffle, stderr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `riffle nexmark` over 2M events writing JSONL into `out`; with `state`, checkpointed
/// every 200 ms.
pub fn nexmark(query: &str, parallelism: usize, out: &Path, state: Option<&Path>) -> Command {
    nexmark_run(
        query,
        "2M",
        "10K",
        parallelism,
        out,
        state.map(|s| (s, "200ms")),
    )
}

/// Runs `cmd` and requires success.
pub fn ok(cmd: &mut Command) -> Output {
    let output = cmd.output().unwrap();
    assert!(
        output.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        stderr(&output)
    );
    output
}

/// Runs `cmd` and requires failure; returns stdout + stderr.
pub fn fails(cmd: &mut Command) -> String {
    let output = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        stderr(&output)
    );
    assert!(!output.status.success(), "{cmd:?} should fail:\n{text}");
    text
}

/// The uninterrupted run's output at parallelism 2.
pub fn reference(query: &str, dir: &Path) -> Vec<String> {
    let out = dir.join(format!("reference-{query}"));
    ok(&mut nexmark(query, 2, &out, None));
    let lines = published(&out);
    assert!(
        !lines.is_empty(),
        "{query} produced no rows: a vacuous comparison"
    );
    lines
}

/// Starts `query` at parallelism 2, slowed to 300K events/s so it is still running when
/// the test stops it, and waits for its first committed checkpoint.
pub fn start_slow(query: &str, out: &Path, state: &Path) -> Child {
    nexmark_run_slow(query, "2M", out, state)
}

/// [`start_slow`] over `events` events (the longer, the longer it runs).
pub fn nexmark_run_slow(query: &str, events: &str, out: &Path, state: &Path) -> Child {
    let child = nexmark_run(query, events, "10K", 2, out, Some((state, "200ms")))
        .args(["--throttle", "300K"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let latest = state.join(format!("nexmark-{query}/_latest.json"));
    let control = state.join(format!("nexmark-{query}/_control.json"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(latest.exists() && control.exists()) {
        assert!(Instant::now() < deadline, "no checkpoint within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// `GET /api/job` from the job whose control file is `control`.
pub fn get_metrics(control: &Path) -> serde_json::Value {
    let address = super::http::control_address(control);
    let answer = super::http::request(&address, "GET", "/api/job", None);
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.json()
}

pub fn savepoint(state: &Path, pipeline: &str) -> Command {
    let mut cmd = riffle();
    cmd.arg("savepoint")
        .arg("--state")
        .arg(state)
        .args(["--pipeline", pipeline]);
    cmd
}

/// The savepoint's manifest as JSON.
pub fn manifest(state: &Path, pipeline: &str, label: &str) -> serde_json::Value {
    let out = ok(savepoint(state, pipeline).args(["show", label]));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every file under `dir` (none when it does not exist).
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
