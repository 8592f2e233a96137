//! Exactly-once output across crashes (docs/engine.md, "Exactly-once output"): a run aborted at each step of the
//! commit protocol, or killed at random moments, and then resumed, publishes exactly the
//! rows of a run that never crashed.

use crate::common;

use common::{nexmark_run, published, stderr};
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

/// `riffle nexmark` writing JSONL into `out`; with `state`, checkpointed every 30 ms.
fn nexmark(
    query: &str,
    events: &str,
    parallelism: usize,
    out: &Path,
    state: Option<&Path>,
) -> Command {
    nexmark_at("10K", query, events, parallelism, out, state)
}

/// As [`nexmark`], at `rate` events per event-second.
fn nexmark_at(
    rate: &str,
    query: &str,
    events: &str,
    parallelism: usize,
    out: &Path,
    state: Option<&Path>,
) -> Command {
    nexmark_run(
        query,
        events,
        rate,
        parallelism,
        out,
        state.map(|s| (s, "30ms")),
    )
}

/// Runs `cmd` with `RIFFLE_CRASH_AT={at}` and requires that it crashed there.
fn crash(mut cmd: Command, at: &str) {
    let crashed = cmd.env("RIFFLE_CRASH_AT", at).output().unwrap();
    let text = stderr(&crashed);
    assert!(
        !crashed.status.success() && text.contains("RIFFLE_CRASH_AT: crashing"),
        "did not crash at {at}: {text}"
    );
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
            crash(
                nexmark(query, events, parallelism, &out, Some(&state)),
                &format!("{point}:2"),
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
    let mut pipelines = 1;
    while kills < 20 {
        let mut child = nexmark(query, events, parallelism, &out, Some(&state))
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_millis(100 + rng.below(500));
        while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(5));
        }
        if let Some(status) = child.try_wait().unwrap() {
            // The pipeline completed between kills: its output must be exact; then
            // start a fresh one and keep killing until 20 kills in all.
            assert!(status.success(), "seed {seed}: a resumed run failed");
            assert!(
                published(&out) == expected,
                "seed {seed}: rows differ after {kills} kills (pipeline {pipelines})"
            );
            std::fs::remove_dir_all(&out).unwrap();
            std::fs::remove_dir_all(&state).unwrap();
            pipelines += 1;
            assert!(pipelines < 50, "runs end too fast to be killed");
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

#[test]
fn q8_resumes_exactly_from_incremental_checkpoints() {
    // At the V1 rate no 10 s window closes during the run, so the window join's buffers
    // only grow and each checkpoint reuses the files of the rows it already wrote.
    let args = |out: &Path, state: Option<&Path>| {
        let mut cmd = nexmark_at("10M", "q8", "3M", 2, out, None);
        if let Some(state) = state {
            cmd.args(["--checkpoint-interval", "20ms", "--retain-checkpoints", "2"])
                .arg("--state")
                .arg(state);
        }
        cmd
    };
    let dir = tempfile::tempdir().unwrap();
    let reference = args(&dir.path().join("reference"), None).output().unwrap();
    assert!(reference.status.success(), "{}", stderr(&reference));
    let expected = published(&dir.path().join("reference"));
    assert!(!expected.is_empty());

    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    // Epochs follow one another as fast as checkpoints commit: unthrottled, the whole input
    // once passed in 5 epochs (0.42 s). Throttled it lasts at least 3 s; the resume runs at
    // full speed (the throttle is no part of the pipeline's state).
    let mut crashing = args(&out, Some(&state));
    crashing.args(["--throttle", "1M"]);
    crash(crashing, "after-latest-flip:6");
    // GC kept two committed epochs, and every file they reference — also files in the
    // directories of older, deleted epochs — is still there.
    let files = common::checkpoints::referenced_files(&state.join("nexmark-q8"));
    let reused = files.iter().filter(|f| f.reused).count();
    assert!(reused > 0, "no checkpoint reused an older file");

    let resumed = args(&out, Some(&state)).output().unwrap();
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    let got = published(&out);
    assert_eq!(got.len(), expected.len());
    assert!(
        got == expected,
        "rows differ after resuming from reused files"
    );
}

#[test]
fn a_checkpoint_taken_at_p2_resumes_exactly_at_p1_and_p4() {
    // Operators split their state by key group; the Nexmark source skips every block the
    // old subtasks had produced.
    for (query, events) in [("q5", "1M"), ("q8", "2M")] {
        let expected = crash_free(query, events, 2);
        for parallelism in [1, 4] {
            let dir = tempfile::tempdir().unwrap();
            let (out, state) = (dir.path().join("out"), dir.path().join("state"));
            crash(
                nexmark(query, events, 2, &out, Some(&state)),
                "after-latest-flip:3",
            );
            let resumed = nexmark(query, events, parallelism, &out, Some(&state))
                .output()
                .unwrap();
            let text = stderr(&resumed);
            assert!(resumed.status.success(), "{text}");
            assert!(text.contains("from checkpoint epoch 3 "), "{text}");
            let got = published(&out);
            assert_eq!(got.len(), expected.len(), "{query} p2 → p{parallelism}");
            assert!(got == expected, "{query} p2 → p{parallelism}: rows differ");
        }
    }
}

/// A rerun whose state is gone (a deleted state root, `memory://`, `--no-restore`) over
/// an output directory holding committed files started empty and wrote those rows
/// again. It is refused, leaving the output as it was; with `--replace-output` the old
/// output is removed first and the result is exact.
#[test]
fn a_rerun_without_its_state_over_committed_output_is_refused_or_replaces_it() {
    let expected = crash_free("q5", "1M", 2);
    let dir = tempfile::tempdir().unwrap();
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    let first = nexmark("q5", "1M", 2, &out, Some(&state)).output().unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(published(&out), expected);

    let no_restore = nexmark("q5", "1M", 2, &out, Some(&state))
        .arg("--no-restore")
        .output()
        .unwrap();
    std::fs::remove_dir_all(&state).unwrap();
    let state_gone = nexmark("q5", "1M", 2, &out, Some(&state)).output().unwrap();
    // The same state (--no-restore) is refused for the published output; a new state
    // root, because the output belongs to the state that is gone.
    for (refused, says) in [
        (&no_restore, "starts from empty state"),
        (&state_gone, "its state is gone"),
    ] {
        let text = stderr(refused);
        assert!(!refused.status.success(), "{text}");
        assert!(
            text.contains(says) && text.contains("--replace-output"),
            "{text}"
        );
        assert_eq!(published(&out), expected, "a refused run changes nothing");
    }

    let replaced = nexmark("q5", "1M", 2, &out, Some(&state))
        .arg("--replace-output")
        .output()
        .unwrap();
    assert!(replaced.status.success(), "{}", stderr(&replaced));
    assert_eq!(published(&out), expected, "no row twice");
}

/// Two pipelines writing one output directory overwrote each other's committed files
/// (q5, then q7 into the same `--output`). An output belongs to the pipeline whose state
/// first wrote it: another is refused, naming the owner, unless it replaces the output;
/// the pipeline that lost its output is refused in turn.
#[test]
fn two_pipelines_never_share_an_output_directory() {
    let q7 = crash_free("q7", "1M", 2);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (q5_state, q7_state) = (dir.path().join("q5-state"), dir.path().join("q7-state"));
    let first = nexmark("q5", "1M", 2, &out, Some(&q5_state))
        .output()
        .unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    let q5_rows = published(&out);
    assert!(out.join(".riffle-owner.json").exists());

    let refused = nexmark("q7", "1M", 2, &out, Some(&q7_state))
        .output()
        .unwrap();
    let text = stderr(&refused);
    assert!(!refused.status.success(), "{text}");
    assert!(
        text.contains("belongs to pipeline `nexmark-q5`") && text.contains("--replace-output"),
        "{text}"
    );
    assert_eq!(published(&out), q5_rows, "a refused run changes nothing");

    let replaced = nexmark("q7", "1M", 2, &out, Some(&q7_state))
        .arg("--replace-output")
        .output()
        .unwrap();
    assert!(replaced.status.success(), "{}", stderr(&replaced));
    assert_eq!(published(&out), q7, "q7's rows exactly, none of q5's");
    let resumed_q5 = nexmark("q5", "1M", 2, &out, Some(&q5_state))
        .output()
        .unwrap();
    let text = stderr(&resumed_q5);
    assert!(
        !resumed_q5.status.success() && text.contains("belongs to pipeline `nexmark-q7`"),
        "{text}"
    );
    assert_eq!(published(&out), q7);

    // Started at the same moment into an empty directory: exactly one writes it.
    let both = dir.path().join("both");
    let runs: Vec<_> = [("q5", "a"), ("q7", "b")]
        .into_iter()
        .map(|(query, state)| {
            let state = dir.path().join(format!("both-{state}"));
            let mut run = nexmark(query, "1M", 2, &both, Some(&state));
            std::thread::spawn(move || run.output().unwrap())
        })
        .collect();
    let results: Vec<_> = runs.into_iter().map(|r| r.join().unwrap()).collect();
    let finished: Vec<usize> = (0..2).filter(|i| results[*i].status.success()).collect();
    assert_eq!(
        finished.len(),
        1,
        "{}\n---\n{}",
        stderr(&results[0]),
        stderr(&results[1])
    );
    let expected = if finished[0] == 0 { &q5_rows } else { &q7 };
    assert_eq!(&published(&both), expected, "the winner's rows exactly");
}

/// A restart whose plan does not fit the checkpoint (here: other key groups) was refused
/// only after recovery had rolled a PREPARED epoch forward and taken a generation. It is
/// refused before anything on storage changes; the right restart is then exact.
#[test]
fn a_restart_that_does_not_fit_its_checkpoint_is_refused_before_anything_changes() {
    let expected = crash_free("q5", "1M", 2);
    let dir = tempfile::tempdir().unwrap();
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    crash(
        nexmark("q5", "1M", 2, &out, Some(&state)),
        "after-manifest-prepared:2",
    );
    let pipeline = state.join("nexmark-q5");
    let names = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    let before = (
        names(&pipeline.join("_generations")),
        names(&pipeline.join("checkpoints/epoch=000002")),
        names(&out),
    );
    let refused = nexmark("q5", "1M", 2, &out, Some(&state))
        .args(["--max-parallelism", "256"])
        .output()
        .unwrap();
    let text = stderr(&refused);
    assert!(
        !refused.status.success() && text.contains("key groups cannot change"),
        "{text}"
    );
    let after = (
        names(&pipeline.join("_generations")),
        names(&pipeline.join("checkpoints/epoch=000002")),
        names(&out),
    );
    assert_eq!(after, before, "no claim, no roll-forward, no output change");
    assert!(!before.1.contains(&"_committed.json".to_string()));

    let resumed = nexmark("q5", "1M", 2, &out, Some(&state)).output().unwrap();
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert_eq!(published(&out), expected);
}

/// The newest checkpoint in a state root was taken by a different pipeline (started over
/// there with --no-restore): it was refused as "a different pipeline" although this
/// pipeline's own checkpoint was still there. The other's epochs are passed over like
/// damaged ones — what they published to this pipeline's sinks would be taken back —
/// and this pipeline resumes from its own newest checkpoint, exactly.
#[test]
fn a_pipeline_resumes_from_its_own_checkpoint_past_anothers_newer_ones() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let (a_out, b_out) = (dir.path().join("a"), dir.path().join("b"));
    let a = || nexmark_run("q5", "1M", "10K", 2, &a_out, Some((&state, "30ms")));
    let first = a().output().unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    let a_rows = published(&a_out);
    // Another event count is another pipeline; one final checkpoint, so that its
    // garbage collection keeps the first pipeline's.
    let b = nexmark_run("q5", "2M", "10K", 2, &b_out, Some((&state, "1h")))
        .arg("--no-restore")
        .output()
        .unwrap();
    assert!(b.status.success(), "{}", stderr(&b));

    let resumed = a().output().unwrap();
    let text = stderr(&resumed);
    assert!(resumed.status.success(), "{text}");
    assert!(
        text.contains("skipping checkpoint epoch")
            && text.contains("taken by a different pipeline"),
        "{text}"
    );
    assert!(text.contains("resuming"), "{text}");
    assert_eq!(published(&a_out), a_rows, "nothing lost or written twice");
}

/// The files of an output directory, sorted (staged ones and the owner record too).
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Output files removed by hand between runs (one file, then `rm out/*`) while the
/// state stays: resuming would go on without those rows, with exit code 0. Recovery
/// refuses, naming the epochs the directory no longer holds, and changes nothing.
#[test]
fn an_output_directory_that_lost_committed_files_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    crash(
        nexmark("q0", "300K", 2, &out, Some(&state)),
        "after-latest-flip:3",
    );
    let committed: Vec<String> = listing(&out)
        .into_iter()
        .filter(|n| n.starts_with("part-") && !n.ends_with(".inprogress"))
        .collect();
    assert!(!committed.is_empty(), "nothing committed by epoch 3");
    std::fs::remove_file(out.join(&committed[0])).unwrap();
    for step in ["one file removed", "every file removed"] {
        let before = listing(&out);
        let refused = nexmark("q0", "300K", 2, &out, Some(&state))
            .output()
            .unwrap();
        let text = stderr(&refused);
        assert!(!refused.status.success(), "{step}: {text}");
        assert!(
            text.contains("no longer holds epoch(s)") && text.contains("nothing was changed"),
            "{step}: {text}"
        );
        assert_eq!(
            listing(&out),
            before,
            "{step}: the refused run changed the output"
        );
        for name in &committed {
            let _ = std::fs::remove_file(out.join(name));
        }
    }
    // Starting over writes everything again.
    let again = nexmark("q0", "300K", 2, &out, Some(&state))
        .arg("--no-restore")
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(published(&out), crash_free("q0", "300K", 2));
}

/// A run restored from an older checkpoint of its own (`--from-checkpoint 3` after the
/// job ran on to its end) writes again what the epochs after 3 published: the file
/// sink takes that back first, so the output equals one clean run's instead of holding
/// those rows twice.
#[test]
fn a_restore_from_an_older_checkpoint_takes_back_what_later_epochs_published() {
    let expected = crash_free("q5", "600K", 2);
    let dir = tempfile::tempdir().unwrap();
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    let first = nexmark("q5", "600K", 2, &out, Some(&state))
        .args(["--retain-checkpoints", "1000"])
        .output()
        .unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(published(&out) == expected, "the first run differs");
    let again = nexmark("q5", "600K", 2, &out, Some(&state))
        .args(["--from-checkpoint", "3"])
        .output()
        .unwrap();
    let text = stderr(&again);
    assert!(again.status.success(), "{text}");
    let got = published(&out);
    assert_eq!(got.len(), expected.len(), "{text}");
    assert!(
        got == expected,
        "rows differ after the restore from epoch 3"
    );
}
