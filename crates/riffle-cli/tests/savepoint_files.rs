//! Savepoints as files through the CLI: moved between state roots as an archive
//! (including `s3://` on a real S3-protocol server), damaged archives refused, every kind
//! of damage reported by `verify`, and the state queried with SQL.

use crate::moto;

use crate::common;

use common::savepoints::{fails, manifest, nexmark, ok, reference, savepoint, start_slow, walk};
use common::{copy_dir, published, riffle, stderr};
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    // A byte inside the first state file's data (a byte in the middle of the archive
    // sometimes fell into a member's zero padding, which no checksum covers).
    let mut flipped = bytes.clone();
    flipped[second_member(&bytes) + 512 + 100] ^= 0x5a;
    let altered = dir.path().join("altered.tar");
    std::fs::write(&altered, &flipped).unwrap();
    let not_tar = dir.path().join("notes.tar");
    std::fs::write(&not_tar, b"this is not an archive").unwrap();

    let huge = dir.path().join("huge.tar");
    std::fs::write(&huge, claim_huge_second_member(&bytes)).unwrap();

    let target = dir.path().join("target");
    for (archive, what) in [
        (&truncated, "truncated"),
        (&altered, ""),
        (&not_tar, ""),
        (&huge, "claims 68719476736 bytes"),
    ] {
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

/// Where the second member's tar header starts (after the manifest, the first member).
fn second_member(archive: &[u8]) -> usize {
    let text = String::from_utf8_lossy(&archive[124..136]);
    let first_size =
        u64::from_str_radix(text.trim_matches(|c: char| c == '\0' || c == ' '), 8).unwrap();
    512 + first_size.div_ceil(512) as usize * 512
}

/// The archive with its second member's tar header claiming 64 GiB (base-256 size, as
/// GNU tar writes sizes past 8 GiB), checksum mended: import used to allocate that much
/// up front and abort.
fn claim_huge_second_member(archive: &[u8]) -> Vec<u8> {
    let second = second_member(archive);
    let mut bytes = archive.to_vec();
    let header = &mut bytes[second..second + 512];
    let size: u64 = 64 << 30;
    header[124] = 0x80;
    let mut field = [0u8; 11];
    field[3..].copy_from_slice(&size.to_be_bytes());
    header[125..136].copy_from_slice(&field);
    header[148..156].fill(b' ');
    let sum: u32 = header.iter().map(|b| u32::from(*b)).sum();
    header[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    bytes
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
    files.retain(|f| f.extension().is_some_and(|x| x == "jsonl"));
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
