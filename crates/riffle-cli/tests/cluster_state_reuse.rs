//! Incremental checkpoints across workers (docs/cluster.md, "One checkpoint across
//! workers"): a worker other than 0 references its unchanged state files from the epoch
//! before once worker 0 says that epoch committed, garbage collection keeps every file
//! a retained checkpoint references, and a resume from such files is exact.

mod common;

use common::{published, riffle, stderr};
use std::path::Path;
use std::process::Command;

/// q8 at the Nexmark V1 rate: no 10 s window closes during the run, so the window join's
/// buffers only grow and each snapshot holds the batches of the one before.
fn q8(dir: &Path, parallelism: usize, workers: usize) -> Command {
    let file = dir.join("q8.sql");
    let source = |event_type: &str| {
        format!(
            "CREATE TABLE {event_type} (WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND) \
             WITH ('connector' = 'nexmark', 'event_type' = '{event_type}', 'events' = '3M', 'rate' = '10M');\n"
        )
    };
    std::fs::write(
        &file,
        format!(
            "{}{}CREATE TABLE q8 WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');
             INSERT INTO q8
             SELECT p.id, p.name, p.w['start'] AS window_start
             FROM (SELECT id, name, tumble(INTERVAL '10' SECOND) AS w FROM person) p
             WHERE EXISTS (
               SELECT 1 FROM (SELECT seller, tumble(INTERVAL '10' SECOND) AS w FROM auction) a
               WHERE a.seller = p.id AND a.w = p.w);",
            source("person"),
            source("auction"),
            dir.join("out").display()
        ),
    )
    .unwrap();
    let mut cmd = riffle();
    cmd.arg("run")
        .arg(&file)
        .args([
            "-p",
            &parallelism.to_string(),
            "--workers",
            &workers.to_string(),
        ])
        .args(["--checkpoint-interval", "20ms", "--retain-checkpoints", "2"])
        .args(["--restart", "none", "--state"])
        .arg(dir.join("state"));
    cmd
}

/// `(subtask, path)` of every state file a manifest references.
fn manifest_files(epoch_dir: &Path) -> Vec<(u64, String)> {
    let text = std::fs::read_to_string(epoch_dir.join("_manifest.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut files = Vec::new();
    for op in manifest["operators"].as_array().unwrap() {
        for subtask in op["subtasks"].as_array().unwrap() {
            for file in subtask["files"].as_array().unwrap() {
                files.push((
                    subtask["subtask"].as_u64().unwrap(),
                    file["path"].as_str().unwrap().to_string(),
                ));
            }
        }
    }
    files
}

#[test]
fn a_worker_reuses_unchanged_state_files_and_a_resume_from_them_is_exact() {
    let reference = tempfile::tempdir().unwrap();
    let run = q8(reference.path(), 2, 1).output().unwrap();
    assert!(run.status.success(), "{}", stderr(&run));
    let expected = published(&reference.path().join("out"));
    assert!(!expected.is_empty());

    let dir = tempfile::tempdir().unwrap();
    // Worker 0's coordinator stops at epoch 6; the launcher kills worker 1.
    let crashed = q8(dir.path(), 2, 2)
        .env("RIFFLE_CRASH_AT", "after-latest-flip:6")
        .output()
        .unwrap();
    assert!(!crashed.status.success(), "{}", stderr(&crashed));
    let pipeline = dir.path().join("state/q8");
    let mut reused_by_worker_1 = 0;
    for entry in std::fs::read_dir(pipeline.join("checkpoints")).unwrap() {
        let epoch_dir = entry.unwrap().path();
        if !epoch_dir.join("_manifest.json").exists() {
            continue;
        }
        let own = format!(
            "checkpoints/{}/",
            epoch_dir.file_name().unwrap().to_string_lossy()
        );
        for (subtask, path) in manifest_files(&epoch_dir) {
            assert!(
                pipeline.join(&path).exists(),
                "GC deleted {path}, which a retained manifest references"
            );
            // At p2 on 2 workers, subtask 1 runs on worker 1.
            if subtask == 1 && !path.starts_with(&own) {
                reused_by_worker_1 += 1;
            }
        }
    }
    assert!(
        reused_by_worker_1 > 0,
        "worker 1 reused no file: {}",
        stderr(&crashed)
    );

    let resumed = q8(dir.path(), 2, 2).output().unwrap();
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    assert!(
        published(&dir.path().join("out")) == expected,
        "rows differ after resuming from files worker 1 reused"
    );
}
