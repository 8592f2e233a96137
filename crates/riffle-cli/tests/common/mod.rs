//! Helpers shared by the CLI tests.

#![allow(dead_code)]

pub mod checkpoints;
pub mod http;
pub mod savepoints;
pub mod workers;

use std::path::Path;
use std::process::{Command, Output};

/// The `riffle` binary under test.
pub fn riffle() -> Command {
    Command::new(env!("CARGO_BIN_EXE_riffle"))
}

/// `riffle nexmark` writing JSONL into `out`, without in-process restarts; with
/// `checkpoints = Some((state, interval))`, checkpointed into `state`.
pub fn nexmark_run(
    query: &str,
    events: &str,
    rate: &str,
    parallelism: usize,
    out: &Path,
    checkpoints: Option<(&Path, &str)>,
) -> Command {
    let mut cmd = riffle();
    cmd.args(["nexmark", "--query", query, "--events", events])
        .args(["--rate", rate, "--parallelism", &parallelism.to_string()])
        .args(["--restart", "none", "--output"])
        .arg(out);
    if let Some((state, interval)) = checkpoints {
        cmd.args(["--checkpoint-interval", interval, "--state"])
            .arg(state);
    }
    cmd
}

/// Copies the directory tree `from` to `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The stderr of a finished command, as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Every published line of an output directory, sorted; fails if a staged
/// (unpublished) file is left over.
pub fn published(dir: &Path) -> Vec<String> {
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            !name.ends_with(".inprogress"),
            "staged file {name} left in the output after a completed run"
        );
    }
    published_lines(dir)
}

/// Every line of the published files of an output directory, sorted; staged
/// (`.inprogress`) files and the owner record (`.riffle-owner.json`) are not output and
/// are passed over.
pub fn published_lines(dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if path.extension().is_some_and(|x| x == "inprogress") || name.starts_with('.') {
            continue;
        }
        lines.extend(
            std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .map(String::from),
        );
    }
    lines.sort();
    lines
}

/// Sends SIGTERM to `job` (as Ctrl-C would) and requires that it stopped with a
/// savepoint; returns the savepoint's label and the job's stderr.
pub fn stop_with_savepoint(job: std::process::Child) -> (String, String) {
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(job.id() as i32, libc::SIGTERM) };
    let out = job.wait_with_output().unwrap();
    let text = stderr(&out);
    assert!(out.status.success(), "{text}");
    let label = text
        .split("stopped with savepoint `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no savepoint named in: {text}"))
        .to_string();
    (label, text)
}

/// The published JSON-lines part files of a file sink's output directory in commit
/// order: by epoch (`part-{subtask}-e{epoch}-{k}.jsonl`; without checkpoints there is
/// none), then by name. Staged files are not listed.
pub fn committed_jsonl_files(out: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<((u64, String), std::path::PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(out).into_iter().flatten() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".jsonl") {
            let epoch = name
                .split('-')
                .find_map(|p| p.strip_prefix('e').and_then(|e| e.parse().ok()))
                .unwrap_or(0);
            files.push(((epoch, name), path));
        }
    }
    files.sort();
    files.into_iter().map(|(_, path)| path).collect()
}

/// `Ok(rows)` when riffle's rows equal the `other` answer's (both sorted), else how they
/// differ: the counts and a few rows each side lacks.
pub fn same_rows(riffle: &[String], other: &[String], other_name: &str) -> Result<usize, String> {
    if riffle == other {
        return Ok(riffle.len());
    }
    let missing: Vec<&String> = other
        .iter()
        .filter(|r| !riffle.contains(r))
        .take(3)
        .collect();
    let extra: Vec<&String> = riffle
        .iter()
        .filter(|r| !other.contains(r))
        .take(3)
        .collect();
    Err(format!(
        "riffle {} rows, {other_name} {}; missing from riffle e.g. {missing:?}; not {other_name}'s e.g. {extra:?}",
        riffle.len(),
        other.len()
    ))
}
