//! Damaged checkpoints: each kind of damage is named (file and reason), recovery falls
//! back to the previous retained checkpoint, and a run never silently restarts from
//! empty state.

use crate::common;

use common::{copy_dir, riffle, stderr};
use std::path::{Path, PathBuf};
use std::process::Output;

fn run_q5(state: &Path) -> Output {
    riffle()
        .args([
            "nexmark", "--query", "q5", "--events", "1M", "--rate", "10K",
        ])
        .args([
            "--restart",
            "none",
            "--checkpoint-interval",
            "30ms",
            "--state",
        ])
        .arg(state)
        .output()
        .unwrap()
}

/// Committed epoch directories, oldest first.
fn epochs(state: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(state.join("nexmark-q5/checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    dirs
}

fn epoch_number(dir: &Path) -> u64 {
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    name.trim_start_matches("epoch=").parse().unwrap()
}

/// The first state file of the `bid` source (its offsets) in `epoch_dir`.
fn state_file(epoch_dir: &Path) -> PathBuf {
    let dir = epoch_dir.join("bid");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .into_iter()
        .next()
        .expect("the source has a state file")
}

#[test]
fn damaged_checkpoints_are_named_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let pristine = dir.path().join("pristine");
    let first = run_q5(&pristine);
    assert!(first.status.success(), "{}", stderr(&first));
    let committed = epochs(&pristine);
    assert!(
        committed.len() >= 2,
        "need two retained checkpoints to fall back: {committed:?}"
    );

    // verify: all fine; gc --dry-run: keeping one epoch would delete the others.
    let checkpoints = |args: &[&str], state: &Path| {
        riffle()
            .arg("checkpoints")
            .args(args)
            .args(["--pipeline", "nexmark-q5", "--state"])
            .arg(state)
            .output()
            .unwrap()
    };
    let verified = checkpoints(&["verify"], &pristine);
    assert!(verified.status.success(), "{}", stderr(&verified));
    let report = String::from_utf8_lossy(&verified.stdout).into_owned();
    assert!(!report.contains("unreachable"), "{report}");
    // A file no manifest references is listed, and is not damage.
    let stray = dir.path().join("stray");
    copy_dir(&pristine, &stray);
    let newest = epochs(&stray).last().unwrap().clone();
    std::fs::write(
        newest.join("leftover.parquet"),
        b"from an epoch that never committed",
    )
    .unwrap();
    let verified = checkpoints(&["verify"], &stray);
    let report = String::from_utf8_lossy(&verified.stdout).into_owned();
    assert!(verified.status.success(), "{report}");
    assert!(
        report.contains("unreachable: ") && report.contains("leftover.parquet"),
        "{report}"
    );
    let gc = checkpoints(&["gc", "--dry-run", "--retain", "1"], &pristine);
    let text = String::from_utf8_lossy(&gc.stdout).into_owned();
    assert!(
        text.matches("would delete epoch").count() == committed.len() - 1,
        "{text}"
    );
    assert_eq!(
        epochs(&pristine).len(),
        committed.len(),
        "a dry run deletes nothing"
    );

    type Damage = fn(&Path) -> String;
    let damages: [(&str, Damage); 5] = [
        ("truncated state file", |newest| {
            let f = state_file(newest);
            let bytes = std::fs::read(&f).unwrap();
            std::fs::write(&f, &bytes[..bytes.len() / 2]).unwrap();
            f.file_name().unwrap().to_string_lossy().into_owned()
        }),
        ("flipped byte", |newest| {
            let f = state_file(newest);
            let mut bytes = std::fs::read(&f).unwrap();
            let i = bytes.len() / 2;
            bytes[i] ^= 0x5a;
            std::fs::write(&f, &bytes).unwrap();
            "CRC32C".into()
        }),
        ("removed state file", |newest| {
            let f = state_file(newest);
            std::fs::remove_file(&f).unwrap();
            "missing".into()
        }),
        ("manifest is not JSON", |newest| {
            std::fs::write(newest.join("_manifest.json"), b"{ not json").unwrap();
            "_manifest.json".into()
        }),
        ("manifest deleted", |newest| {
            std::fs::remove_file(newest.join("_manifest.json")).unwrap();
            "swept incomplete epoch".into()
        }),
    ];
    for (what, damage) in damages {
        let state = dir.path().join(what.replace(' ', "-"));
        copy_dir(&pristine, &state);
        let all = epochs(&state);
        let newest = all.last().unwrap();
        let previous = epoch_number(&all[all.len() - 2]);
        let needle = damage(newest);
        if what != "manifest deleted" {
            let verified = checkpoints(&["verify"], &state);
            let report = String::from_utf8_lossy(&verified.stdout).into_owned();
            assert!(
                !verified.status.success(),
                "{what}: verify passed: {report}"
            );
            assert!(report.contains("DAMAGED"), "{what}: {report}");
        }
        let resumed = run_q5(&state);
        let text = stderr(&resumed);
        assert!(resumed.status.success(), "{what}: {text}");
        assert!(
            text.contains(&needle),
            "{what}: the message names `{needle}`: {text}"
        );
        assert!(
            text.contains(&format!("from checkpoint epoch {previous} ")),
            "{what}: falls back to epoch {previous}: {text}"
        );
        assert!(
            !text.contains("starting from empty state"),
            "{what}: {text}"
        );
    }

    // A garbage `_latest.json` is only a hint: the newest checkpoint is still used.
    let state = dir.path().join("bad-hint");
    copy_dir(&pristine, &state);
    std::fs::write(state.join("nexmark-q5/_latest.json"), b"garbage").unwrap();
    let newest = epoch_number(epochs(&state).last().unwrap());
    let text = stderr(&run_q5(&state));
    assert!(
        text.contains(&format!("from checkpoint epoch {newest} ")),
        "{text}"
    );

    // Every checkpoint damaged: a clear error, not a silent start from empty state.
    let state = dir.path().join("all-damaged");
    copy_dir(&pristine, &state);
    for epoch in epochs(&state) {
        std::fs::write(epoch.join("_manifest.json"), b"garbage").unwrap();
    }
    let failed = run_q5(&state);
    let text = stderr(&failed);
    assert!(!failed.status.success(), "{text}");
    assert!(
        text.contains("no usable checkpoint") && text.contains("--no-restore"),
        "{text}"
    );
    assert!(!text.contains("starting from empty state"), "{text}");
}
