//! A partitioned file sink over several minutes of event time: partitions close while
//! the job runs, each gets `_SUCCESS` only once its files are all published (no file
//! lands in a marked partition), through a crash in the commit and a restart at
//! another parallelism, and the rows equal a clean run's.

use crate::common::{riffle, stderr};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// 300K bids at 1K events per second of event time: about five minutes, one
/// partition per minute. A partition's time is its start, so the delay is its span
/// (as Flink's docs ask: '1 h' for hourly partitions); with less, rows still arrive
/// after the mark, as in Flink.
fn pipeline(out: &Path) -> String {
    format!(
        "CREATE TABLE bid (WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
           WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '300K', 'rate' = '1K');
         CREATE TABLE minutes (auction BIGINT, price BIGINT, date_time TIMESTAMP(3), dt STRING, hm STRING)
           PARTITIONED BY (dt, hm) WITH (
           'connector' = 'filesystem', 'path' = '{}', 'format' = 'json',
           'sink.partition-commit.trigger' = 'partition-time',
           'sink.partition-commit.delay' = '1 min',
           'sink.partition-commit.policy.kind' = 'success-file',
           'partition.time-extractor.timestamp-pattern' = '$dt $hm:00');
         INSERT INTO minutes
         SELECT auction, price, date_time, DATE_FORMAT(date_time, 'yyyy-MM-dd'), DATE_FORMAT(date_time, 'HH:mm')
         FROM bid;",
        out.display()
    )
}

fn run(dir: &Path, parallelism: usize) -> Command {
    let file = dir.join("minutes.sql");
    std::fs::write(&file, pipeline(&dir.join("out"))).unwrap();
    let mut cmd = riffle();
    cmd.arg("run")
        .arg(&file)
        .args(["-p", &parallelism.to_string(), "--throttle", "60K"])
        .args(["--checkpoint-interval", "100ms", "--state"])
        .arg(dir.join("state"));
    cmd
}

/// Each partition directory and its published files.
fn published(out: &Path) -> BTreeMap<String, (bool, Vec<String>)> {
    let mut found = BTreeMap::new();
    for dt in std::fs::read_dir(out).into_iter().flatten().flatten() {
        for hm in std::fs::read_dir(dt.path()).into_iter().flatten().flatten() {
            let mut files = Vec::new();
            let mut marked = false;
            for f in std::fs::read_dir(hm.path()).into_iter().flatten().flatten() {
                let name = f.file_name().to_string_lossy().into_owned();
                marked |= name == "_SUCCESS";
                if name.ends_with(".jsonl") {
                    files.push(name);
                }
            }
            files.sort();
            let key = format!(
                "{}/{}",
                dt.file_name().to_string_lossy(),
                hm.file_name().to_string_lossy()
            );
            found.insert(key, (marked, files));
        }
    }
    found
}

/// Runs `cmd` to its end while watching `out`: the files of each partition when it was
/// first seen marked. Returns whether the run succeeded, its stderr, and those files.
fn watched(mut cmd: Command, out: &Path) -> (bool, String, BTreeMap<String, Vec<String>>) {
    let log = out.with_extension("log");
    let mut child = cmd
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut at_marking = BTreeMap::new();
    let started = Instant::now();
    let status = loop {
        for (partition, (marked, files)) in published(out) {
            if marked {
                at_marking.entry(partition).or_insert(files);
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the run hangs"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    (
        status.success(),
        std::fs::read_to_string(&log).unwrap(),
        at_marking,
    )
}

/// Every row of every published file, sorted.
fn rows(out: &Path) -> Vec<String> {
    let mut rows: Vec<String> = published(out)
        .iter()
        .flat_map(|(partition, (_, files))| files.iter().map(move |f| out.join(partition).join(f)))
        .flat_map(|f: PathBuf| {
            std::fs::read_to_string(&f)
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn partitions_are_marked_once_closed_and_never_written_after_through_a_crash() {
    let reference = tempfile::tempdir().unwrap();
    let out = riffle()
        .arg("run")
        .arg({
            let file = reference.path().join("minutes.sql");
            std::fs::write(&file, pipeline(&reference.path().join("out"))).unwrap();
            file
        })
        .args(["-p", "1", "--checkpoint-interval", "1s", "--state"])
        .arg(reference.path().join("state"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let expected = rows(&reference.path().join("out"));
    assert!(expected.len() > 200_000, "{}", expected.len());

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // A crash right after the sink's commit of epoch 20, before the manifest records
    // it: recovery rolls the epoch forward (renames and marks again, idempotently).
    let mut crashing = run(dir.path(), 2);
    crashing.env("RIFFLE_CRASH_AT", "after-sink-commit:20");
    let (ok, text, mut at_marking) = watched(crashing, &out);
    assert!(!ok, "the run did not crash: {text}");
    let (ok, text, resumed) = watched(run(dir.path(), 3), &out);
    assert!(ok, "{text}");
    for (partition, files) in resumed {
        at_marking.entry(partition).or_insert(files);
    }
    let end = published(&out);
    assert!(end.len() >= 4, "too few partitions: {end:?}");
    let closed_while_running = at_marking.len();
    for (partition, (marked, files)) in &end {
        assert!(marked, "{partition} has no _SUCCESS after the input ended");
        assert!(!files.is_empty(), "{partition} is marked and empty");
        if let Some(seen) = at_marking.get(partition) {
            assert_eq!(
                seen, files,
                "{partition}: files were published after _SUCCESS"
            );
        }
    }
    assert!(
        closed_while_running >= 3,
        "only {closed_while_running} partitions closed while the job ran"
    );
    assert_eq!(rows(&out), expected, "rows differ from a clean run's");
}

#[test]
fn partition_options_riffle_cannot_honour_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |options: &str, partitioned_by: &str| {
        let file = dir.path().join("p.sql");
        std::fs::write(
            &file,
            format!(
                "CREATE TABLE bid (WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
                   WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '10');
                 CREATE TABLE o (auction BIGINT, dt STRING) {partitioned_by}
                   WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json'{options});
                 INSERT INTO o SELECT auction, DATE_FORMAT(date_time, 'yyyy-MM-dd') FROM bid;",
                dir.path().join("out").display()
            ),
        )
        .unwrap();
        let out = riffle().arg("explain").arg(&file).output().unwrap();
        assert!(!out.status.success(), "{options} {partitioned_by}: planned");
        stderr(&out)
    };
    let partitioned = "PARTITIONED BY (dt)";
    let text = refused(
        ", 'sink.partition-commit.policy.kind' = 'success-file'",
        partitioned,
    );
    assert!(text.contains("partition-time"), "{text}");
    let text = refused(
        ", 'sink.partition-commit.policy.kind' = 'metastore', 'sink.partition-commit.trigger' = 'partition-time'",
        partitioned,
    );
    assert!(text.contains("metastore"), "{text}");
    let text = refused(", 'sink.partition-commit.delay' = '1 min'", "");
    assert!(text.contains("PARTITIONED BY"), "{text}");
    let text = refused("", "PARTITIONED BY (days(dt))");
    assert!(text.contains("DATE_FORMAT"), "{text}");
    let text = refused("", "PARTITIONED BY (nope)");
    assert!(text.contains("nope"), "{text}");
    let text = refused(
        ", 'sink.partition-commit.policy.kind' = 'success-file', 'sink.partition-commit.trigger' = 'partition-time', 'partition.time-extractor.timestamp-pattern' = '$dt $hour:00'",
        partitioned,
    );
    assert!(text.contains("$hour"), "{text}");
}
