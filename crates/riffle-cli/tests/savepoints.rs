//! Savepoints end to end through the CLI: stop a running job with a savepoint (control
//! endpoint and SIGTERM), restore it at other parallelisms, drain, and refuse plans that
//! do not fit. Moving, damaging and querying savepoints: `savepoint_files.rs`.

use crate::common;

use common::savepoints::{
    fails, get_metrics, manifest, nexmark, ok, reference, savepoint, start_slow,
};
use common::{copy_dir, published, riffle, stderr, stop_with_savepoint};
use std::path::Path;
use std::time::{Duration, Instant};

/// Restores copies of (`state`, `out`) from savepoint `label` at parallelism 1, 2 and 4
/// and requires each to publish exactly `expected`.
fn restore_at_every_parallelism(query: &str, dir: &Path, label: &str, expected: &[String]) {
    for parallelism in [1, 2, 4] {
        let copy = dir.join(format!("restore-p{parallelism}"));
        copy_dir(&dir.join("state"), &copy.join("state"));
        copy_dir(&dir.join("out"), &copy.join("out"));
        let resumed = ok(nexmark(
            query,
            parallelism,
            &copy.join("out"),
            Some(&copy.join("state")),
        )
        .args(["--from-savepoint", label]));
        let text = stderr(&resumed);
        assert!(
            text.contains(&format!("from savepoint `{label}`")),
            "{text}"
        );
        if parallelism != 2 {
            assert!(
                text.contains(&format!("rescaled 2 → {parallelism}")),
                "{text}"
            );
        }
        let got = published(&copy.join("out"));
        assert_eq!(
            got.len(),
            expected.len(),
            "{query} restored at p{parallelism}: row count"
        );
        assert!(
            got == expected,
            "{query} restored at p{parallelism}: rows differ"
        );
    }
}

#[test]
fn q5_stopped_through_the_control_endpoint_restores_at_p1_p2_p4() {
    let dir = tempfile::tempdir().unwrap();
    let expected = reference("q5", dir.path());
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    let job = start_slow("q5", &out, &state);
    // The control endpoint reports live metrics. `_latest.json` is flipped just before
    // the checkpoint's event reaches listeners: poll until the count catches up.
    let control = state.join("nexmark-q5/_control.json");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut metrics = get_metrics(&control);
    while metrics["checkpoints"]["committed"].as_u64() == Some(0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        metrics = get_metrics(&control);
    }
    assert!(metrics["source_rows"].as_u64().unwrap() > 0, "{metrics}");
    assert!(
        metrics["checkpoints"]["committed"].as_u64().unwrap() >= 1,
        "{metrics}"
    );
    // A savepoint while it runs on, then one that stops it.
    let taken = ok(savepoint(&state, "nexmark-q5").args(["create", "--label", "running"]));
    assert!(String::from_utf8_lossy(&taken.stdout).contains("savepoint `running`"));
    ok(savepoint(&state, "nexmark-q5").args(["create", "--stop", "--label", "stop"]));
    let stopped = job.wait_with_output().unwrap();
    let text = stderr(&stopped);
    assert!(stopped.status.success(), "{text}");
    assert!(text.contains("stopped with savepoint `stop`"), "{text}");
    assert!(
        !state.join("nexmark-q5/_control.json").exists(),
        "the control file outlived the job"
    );
    // Stopped part-way: open windows are in the savepoint, not in the output.
    let saved = manifest(&state, "nexmark-q5", "stop");
    assert!(saved["watermark"].as_i64().unwrap() < i64::MAX, "{saved}");
    assert!(published(&out).len() < expected.len());
    // Self-contained: no file of the savepoint lies in checkpoints/.
    for op in saved["operators"].as_array().unwrap() {
        for sub in op["subtasks"].as_array().unwrap() {
            for file in sub["files"].as_array().unwrap() {
                assert!(file["path"]
                    .as_str()
                    .unwrap()
                    .starts_with("savepoints/stop/"));
            }
        }
    }
    let list = ok(savepoint(&state, "nexmark-q5").arg("list"));
    let list = String::from_utf8_lossy(&list.stdout).into_owned();
    assert!(list.contains("running") && list.contains("stop"), "{list}");
    restore_at_every_parallelism("q5", dir.path(), "stop", &expected);

    // A run restored from the savepoint that crashes before its own first checkpoint
    // restarts from the savepoint again (registered as epoch E+1), not from an older
    // checkpoint; meanwhile that epoch reads the savepoint's files, so deleting the
    // savepoint is refused. The other savepoint goes; `stop` stays intact.
    let stop_epoch = saved["epoch"].as_u64().unwrap();
    let crashed = dir.path().join("crash-after-restore");
    copy_dir(&state, &crashed.join("state"));
    copy_dir(&out, &crashed.join("out"));
    let (crashed_out, crashed_state) = (crashed.join("out"), crashed.join("state"));
    let text = fails(
        nexmark("q5", 4, &crashed_out, Some(&crashed_state))
            .args(["--from-savepoint", "stop"])
            // Throttled so that it reaches epoch E+2 even on a loaded machine.
            .args(["--throttle", "500K"])
            .env(
                "RIFFLE_CRASH_AT",
                format!("after-snapshot-upload:{}", stop_epoch + 2),
            ),
    );
    assert!(text.contains("RIFFLE_CRASH_AT: crashing"), "{text}");
    let text = fails(savepoint(&crashed_state, "nexmark-q5").args(["delete", "stop"]));
    assert!(text.contains("still read its state"), "{text}");
    let listed = ok(riffle()
        .args(["checkpoints", "list", "--state"])
        .arg(&crashed_state));
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(
        listed.contains("(restored from savepoint `stop`)"),
        "{listed}"
    );
    ok(savepoint(&crashed_state, "nexmark-q5").args(["delete", "running"]));
    let resumed = ok(&mut nexmark("q5", 4, &crashed_out, Some(&crashed_state)));
    let text = stderr(&resumed);
    assert!(
        text.contains(&format!("from checkpoint epoch {} ", stop_epoch + 1)),
        "{text}"
    );
    assert!(
        published(&crashed_out) == expected,
        "resumed after a crash right after the restore"
    );
    let verify = ok(riffle()
        .args(["checkpoints", "verify", "--all", "--state"])
        .arg(&crashed_state));
    let verify = String::from_utf8_lossy(&verify.stdout).into_owned();
    assert!(
        verify.contains("savepoint stop: ok") && !verify.contains("savepoint running"),
        "{verify}"
    );
    // Savepoints need checkpoints on.
    let text = fails(nexmark("q5", 2, &out, None).args(["--from-savepoint", "stop"]));
    assert!(text.contains("--checkpoint-interval"), "{text}");

    // The stop epoch is a checkpoint too: --from-checkpoint restores it the same way.
    let epoch = saved["epoch"].as_u64().unwrap().to_string();
    let copy = dir.path().join("from-checkpoint");
    copy_dir(&state, &copy.join("state"));
    copy_dir(&out, &copy.join("out"));
    let resumed = ok(
        nexmark("q5", 3, &copy.join("out"), Some(&copy.join("state")))
            .args(["--from-checkpoint", &epoch]),
    );
    assert!(stderr(&resumed).contains(&format!("from checkpoint epoch {epoch}")));
    assert!(
        published(&copy.join("out")) == expected,
        "restored from checkpoint {epoch} at p3"
    );
}

#[test]
fn q8_stopped_by_sigterm_restores_at_p1_p2_p4() {
    let dir = tempfile::tempdir().unwrap();
    let expected = reference("q8", dir.path());
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    let job = start_slow("q8", &out, &state);
    let (label, text) = stop_with_savepoint(job);
    assert!(text.contains("stopping with a savepoint"), "{text}");
    restore_at_every_parallelism("q8", dir.path(), &label, &expected);
}

#[test]
fn drain_fires_every_window_before_the_savepoint() {
    let dir = tempfile::tempdir().unwrap();
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    let job = start_slow("q5", &out, &state);
    ok(savepoint(&state, "nexmark-q5").args(["create", "--stop", "--drain", "--label", "drained"]));
    let stopped = job.wait_with_output().unwrap();
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    let saved = manifest(&state, "nexmark-q5", "drained");
    assert_eq!(saved["watermark"].as_i64(), Some(i64::MAX), "{saved}");
    // Every window fired: the window aggregate holds no rows, and the output has the
    // last window the events read so far reach.
    let counts = ok(riffle()
        .args([
            "state",
            "query",
            "SHOW TABLES",
            "--savepoint",
            "drained",
            "--state",
        ])
        .arg(&state));
    assert!(
        !String::from_utf8_lossy(&counts.stdout).contains("q5_counts"),
        "window state left after a drain: {}",
        String::from_utf8_lossy(&counts.stdout)
    );
    assert!(!published(&out).is_empty());
    // Without --stop a drain is refused (it would fire windows of a running job).
    let text = fails(savepoint(&state, "nexmark-q5").args(["create", "--drain"]));
    assert!(text.contains("--stop"), "{text}");
}

#[test]
fn a_plan_that_does_not_fit_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    let job = start_slow("q5", &out, &state);
    ok(savepoint(&state, "nexmark-q5").args(["create", "--stop", "--label", "q5sp"]));
    assert!(job.wait_with_output().unwrap().status.success());

    // The dry run: q5 at p3 restores everything (rescaled); q8 would drop q5's state.
    let check = ok(savepoint(&state, "nexmark-q5").args([
        "check",
        "q5sp",
        "--query",
        "q5",
        "--parallelism",
        "3",
    ]));
    let text = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(
        text.contains("rescaled 2 → 3") && text.contains("ok:"),
        "{text}"
    );
    let text = fails(savepoint(&state, "nexmark-q5").args(["check", "q5sp", "--query", "q8"]));
    assert!(
        text.contains("DROP") && text.contains("new (starts empty)"),
        "{text}"
    );

    // A q8 run from q5's savepoint (by URL): refused naming q5's operators…
    let url = format!("file://{}/nexmark-q5/savepoints/q5sp", state.display());
    let q8_out = dir.path().join("q8-out");
    let text = fails(nexmark("q8", 2, &q8_out, Some(&state)).args(["--from-savepoint", &url]));
    assert!(
        text.contains("q5_counts") && text.contains("--allow-non-restored-state"),
        "{text}"
    );
    // …and allowed to drop it explicitly. (The `bid` source has the same id in both
    // plans, so its position restores; q8's own operators start empty.)
    let run = ok(nexmark("q8", 2, &q8_out, Some(&state)).args([
        "--from-savepoint",
        &url,
        "--allow-non-restored-state",
    ]));
    let text = stderr(&run);
    assert!(
        text.contains("q8_join") && text.contains("new (starts empty)"),
        "{text}"
    );
    assert!(
        text.contains("q5_counts") && text.contains("DROP"),
        "{text}"
    );
    let history = ok(riffle()
        .args([
            "checkpoints",
            "history",
            "--pipeline",
            "nexmark-q8",
            "--state",
        ])
        .arg(&state));
    let history = String::from_utf8_lossy(&history.stdout).into_owned();
    assert!(
        history.contains("dropped state of") && history.contains("q5_counts"),
        "{history}"
    );

    // Key groups are fixed for the life of the state.
    let text = fails(nexmark("q5", 2, &out, Some(&state)).args([
        "--from-savepoint",
        "q5sp",
        "--max-parallelism",
        "256",
    ]));
    assert!(
        text.contains("key groups cannot change") && text.contains("--max-parallelism 128"),
        "{text}"
    );
}
