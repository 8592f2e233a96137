//! Savepoints end to end through the CLI: stop a running job with a savepoint (control
//! endpoint and SIGTERM), restore it at other parallelisms, drain, move it between state
//! roots as an archive (including `s3://` on a real S3-protocol server), refuse damaged
//! archives and plans that do not fit, report every kind of damage, and query it.

#[path = "../../riffle-state/tests/support/moto.rs"]
mod moto;

mod common;

use common::{copy_dir, nexmark_run, published, riffle, stderr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `riffle nexmark` over 2M events writing JSONL into `out`; with `state`, checkpointed
/// every 200 ms.
fn nexmark(query: &str, parallelism: usize, out: &Path, state: Option<&Path>) -> Command {
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
fn ok(cmd: &mut Command) -> Output {
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
fn fails(cmd: &mut Command) -> String {
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
fn reference(query: &str, dir: &Path) -> Vec<String> {
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
fn start_slow(query: &str, out: &Path, state: &Path) -> Child {
    let child = nexmark(query, 2, out, Some(state))
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

/// `GET /metrics` from the job whose control file is `control`.
fn get_metrics(control: &Path) -> serde_json::Value {
    use std::io::{Read, Write};
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(control).unwrap()).unwrap();
    let address = file["address"].as_str().unwrap();
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{response}");
    serde_json::from_str(body).unwrap()
}

fn savepoint(state: &Path, pipeline: &str) -> Command {
    let mut cmd = riffle();
    cmd.arg("savepoint")
        .arg("--state")
        .arg(state)
        .args(["--pipeline", pipeline]);
    cmd
}

/// The savepoint's manifest as JSON.
fn manifest(state: &Path, pipeline: &str, label: &str) -> serde_json::Value {
    let out = ok(savepoint(state, pipeline).args(["show", label]));
    serde_json::from_slice(&out.stdout).unwrap()
}

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
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(job.id() as i32, libc::SIGTERM) };
    let stopped = job.wait_with_output().unwrap();
    let text = stderr(&stopped);
    assert!(stopped.status.success(), "{text}");
    assert!(text.contains("stopping with a savepoint"), "{text}");
    let label = text
        .split("stopped with savepoint `")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no savepoint named in: {text}"))
        .to_string();
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
fn a_savepoint_moves_through_an_archive_into_s3_and_back() {
    let server = moto::MotoServer::start("riffle-savepoints");
    let dir = tempfile::tempdir().unwrap();
    let expected = reference("q5", dir.path());
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    let job = start_slow("q5", &out, &state);
    ok(savepoint(&state, "nexmark-q5").args(["create", "--stop", "--label", "moving"]));
    assert!(job.wait_with_output().unwrap().status.success());
    let archive = dir.path().join("moving.tar");
    ok(savepoint(&state, "nexmark-q5")
        .args(["export", "moving", "-o"])
        .arg(&archive));

    // Into s3://, then run from there at another parallelism.
    let s3 = format!("s3://{}/elsewhere", server.bucket);
    ok(riffle()
        .envs(server.env())
        .args(["savepoint", "import", "--state", &s3])
        .arg(&archive));
    let resumed = ok(nexmark("q5", 4, &out, None).envs(server.env()).args([
        "--checkpoint-interval",
        "200ms",
        "--state",
        &s3,
        "--from-savepoint",
        "moving",
    ]));
    assert!(
        stderr(&resumed).contains("from savepoint `moving`"),
        "{}",
        stderr(&resumed)
    );
    assert_eq!(published(&out), expected);

    // And back out of s3:// into another local root, under a new label.
    let back = dir.path().join("back.tar");
    ok(riffle()
        .envs(server.env())
        .args(["savepoint", "export", "moving", "--state", &s3, "-o"])
        .arg(&back));
    let local = dir.path().join("local-root");
    ok(riffle()
        .args(["savepoint", "import", "--label", "returned", "--state"])
        .arg(&local)
        .arg(&back));
    let verify = ok(riffle()
        .args(["checkpoints", "verify", "--all", "--state"])
        .arg(&local));
    assert!(
        String::from_utf8_lossy(&verify.stdout).contains("savepoint returned: ok"),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

#[test]
fn a_damaged_archive_is_refused_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    let job = start_slow("q5", &out, &state);
    ok(savepoint(&state, "nexmark-q5").args(["create", "--stop", "--label", "sp"]));
    assert!(job.wait_with_output().unwrap().status.success());
    let archive = dir.path().join("sp.tar");
    ok(savepoint(&state, "nexmark-q5")
        .args(["export", "sp", "-o"])
        .arg(&archive));
    let bytes = std::fs::read(&archive).unwrap();

    let truncated = dir.path().join("truncated.tar");
    std::fs::write(&truncated, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let mut flipped = bytes.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x5a;
    let altered = dir.path().join("altered.tar");
    std::fs::write(&altered, &flipped).unwrap();
    let not_tar = dir.path().join("notes.tar");
    std::fs::write(&not_tar, b"this is not an archive").unwrap();

    let target = dir.path().join("target");
    for (archive, what) in [(&truncated, "truncated"), (&altered, ""), (&not_tar, "")] {
        let text = fails(
            riffle()
                .args(["savepoint", "import", "--pipeline", "nexmark-q5", "--state"])
                .arg(&target)
                .arg(archive),
        );
        assert!(text.contains("savepoint archive"), "{text}");
        assert!(text.contains(what), "{text}");
        let files = walk(&target);
        assert!(files.is_empty(), "half-imported: {files:?}");
    }
    let list = ok(savepoint(&target, "nexmark-q5").arg("list"));
    assert!(String::from_utf8_lossy(&list.stdout).contains("no savepoints"));
}

/// Every file under `dir` (none when it does not exist).
fn walk(dir: &Path) -> Vec<PathBuf> {
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

#[test]
fn verify_reports_every_kind_of_damage_in_a_savepoint() {
    let dir = tempfile::tempdir().unwrap();
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    let job = start_slow("q5", &out, &state);
    ok(savepoint(&state, "nexmark-q5").args(["create", "--stop", "--label", "sp"]));
    assert!(job.wait_with_output().unwrap().status.success());
    let verify = |root: &Path| {
        riffle()
            .args(["checkpoints", "verify", "--all", "--state"])
            .arg(root)
            .output()
            .unwrap()
    };
    let clean = verify(&state);
    assert!(
        clean.status.success(),
        "{}",
        String::from_utf8_lossy(&clean.stdout)
    );

    let saved = manifest(&state, "nexmark-q5", "sp");
    let first_file = saved["operators"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|o| o["subtasks"].as_array().unwrap())
        .flat_map(|s| s["files"].as_array().unwrap())
        .find(|f| f["rows"].as_u64().unwrap() > 0)
        .unwrap()["path"]
        .as_str()
        .unwrap()
        .to_string();
    type Damage = fn(&Path, &Path);
    let damages: [(&str, Damage, &str); 5] = [
        (
            "missing file",
            |f, _| std::fs::remove_file(f).unwrap(),
            "missing",
        ),
        (
            "wrong size",
            |f, _| {
                let mut b = std::fs::read(f).unwrap();
                b.extend_from_slice(b"extra");
                std::fs::write(f, b).unwrap();
            },
            "bytes on storage",
        ),
        (
            "CRC mismatch",
            |f, _| {
                let mut b = std::fs::read(f).unwrap();
                b[4] ^= 0xff;
                std::fs::write(f, b).unwrap();
            },
            "CRC32C",
        ),
        (
            "bad footer",
            |f, manifest| {
                // Damage the footer and record the damaged bytes' size and CRC, so only
                // decoding the Parquet can tell.
                let mut b = std::fs::read(f).unwrap();
                let n = b.len();
                b[n - 6] ^= 0xff;
                std::fs::write(f, &b).unwrap();
                let text = std::fs::read_to_string(manifest).unwrap();
                let mut m: serde_json::Value = serde_json::from_str(&text).unwrap();
                let name = f.to_string_lossy().into_owned();
                for op in m["operators"].as_array_mut().unwrap() {
                    for sub in op["subtasks"].as_array_mut().unwrap() {
                        for file in sub["files"].as_array_mut().unwrap() {
                            if name.ends_with(file["path"].as_str().unwrap()) {
                                file["crc32c"] = crc32c::crc32c(&b).into();
                            }
                        }
                    }
                }
                std::fs::write(manifest, serde_json::to_vec(&m).unwrap()).unwrap();
            },
            "not readable as Parquet",
        ),
        (
            "bad manifest",
            |_, manifest| std::fs::write(manifest, b"{\"format_version\": 1, \"pipel").unwrap(),
            "not a valid savepoint manifest",
        ),
    ];
    for (what, damage, expect) in damages {
        let copy = dir.path().join(what.replace(' ', "-"));
        copy_dir(&state, &copy);
        let base = copy.join("nexmark-q5");
        damage(
            &base.join(&first_file),
            &base.join("savepoints/sp/_manifest.json"),
        );
        let result = verify(&copy);
        let text = String::from_utf8_lossy(&result.stdout).into_owned();
        assert!(!result.status.success(), "{what} not reported: {text}");
        assert!(
            text.contains("savepoint sp: DAMAGED") && text.contains(expect),
            "{what}: {text}"
        );
    }
}

#[test]
fn state_query_returns_the_counts_the_job_emitted() {
    // q4 emits the running average closing price per category (one row per category
    // and input batch that changed it). At a stop savepoint the committed output holds
    // every row up to the barrier, so the state's sum / count per category is the last
    // average emitted for it, and each category's count covers at least its rows.
    let dir = tempfile::tempdir().unwrap();
    let (out, state) = (dir.path().join("out"), dir.path().join("state"));
    let job = start_slow("q4", &out, &state);
    std::thread::sleep(Duration::from_millis(500));
    ok(savepoint(&state, "nexmark-q4").args(["create", "--stop", "--label", "q4sp"]));
    assert!(job.wait_with_output().unwrap().status.success());
    let mut emitted: std::collections::BTreeMap<i64, (u64, f64)> = Default::default();
    let mut files: Vec<PathBuf> = walk(&out);
    files.sort();
    for file in files {
        for line in std::fs::read_to_string(&file).unwrap().lines() {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            let entry = emitted
                .entry(row["category"].as_i64().unwrap())
                .or_default();
            entry.0 += 1;
            entry.1 = row["avg_final"].as_f64().unwrap();
        }
    }
    assert!(!emitted.is_empty(), "q4 emitted nothing before the stop");
    let queried = ok(riffle()
        .args([
            "state",
            "query",
            "SELECT category, avg_final__count, avg_final__value / avg_final__count FROM q4_average ORDER BY category",
            "--format",
            "csv",
            "--pipeline",
            "nexmark-q4",
            "--savepoint",
            "q4sp",
            "--state",
        ])
        .arg(&state));
    let text = String::from_utf8_lossy(&queried.stdout).into_owned();
    let rows: Vec<(i64, u64, f64)> = text
        .lines()
        .skip(1)
        .map(|l| {
            let v: Vec<&str> = l.split(',').collect();
            (
                v[0].parse().unwrap(),
                v[1].parse().unwrap(),
                v[2].parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows.len(), emitted.len(), "{text}");
    for (category, count, average) in rows {
        let (rows_emitted, last) = emitted[&category];
        assert!(
            count >= rows_emitted,
            "category {category}: {count} < {rows_emitted}"
        );
        assert!(
            (average - last).abs() <= 1e-9 * last.abs(),
            "category {category}: {average} vs {last}"
        );
    }
}
