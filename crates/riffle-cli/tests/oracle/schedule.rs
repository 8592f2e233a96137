//! How a case is run: a sequence of `riffle run` processes on one state root, each at
//! its own parallelism, all but the last ended by a crash point of the commit protocol
//! or by `kill -9` at a random moment; the last must finish.

use rand::rngs::StdRng;
use rand::Rng;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use riffle_runtime::CrashPoint;

/// What ends one attempt early.
#[derive(Debug, Clone, Copy)]
pub enum Disruption {
    /// Abort at a crash point, this many epochs past the newest one on storage.
    CrashAt { point: &'static str, epochs: u64 },
    /// `kill -9` this long after the start.
    Kill { after_ms: u64 },
    /// No run: truncate a state file that only the newest checkpoint holds, so the
    /// next run must fall back to an older one and replay the epochs after it.
    DamageNewest,
}

/// The attempts of one case: parallelism and how each ends (`None`: it must finish).
#[derive(Debug, Clone)]
pub struct Schedule {
    pub attempts: Vec<(usize, Option<Disruption>)>,
}

impl Schedule {
    pub fn random(rng: &mut StdRng) -> Self {
        let disruptions = rng.random_range(0..=3);
        let mut attempts = Vec::new();
        for _ in 0..disruptions {
            let d = if rng.random_bool(0.15) {
                Disruption::DamageNewest
            } else if rng.random_bool(0.5) {
                Disruption::CrashAt {
                    // Every step `RIFFLE_CRASH_AT` can stop a process after.
                    point: CrashPoint::ALL[rng.random_range(0..CrashPoint::ALL.len())].name(),
                    epochs: rng.random_range(1..=5),
                }
            } else {
                Disruption::Kill {
                    after_ms: rng.random_range(150..1200),
                }
            };
            attempts.push((rng.random_range(1..=4), Some(d)));
        }
        attempts.push((rng.random_range(1..=4), None));
        Self { attempts }
    }

    /// One clean run at `parallelism`: the simplest schedule a failure shrinks to.
    pub fn clean(parallelism: usize) -> Self {
        Self {
            attempts: vec![(parallelism, None)],
        }
    }

    pub fn describe(&self) -> String {
        self.attempts
            .iter()
            .map(|(p, d)| match d {
                None => format!("p{p} to the end"),
                Some(Disruption::CrashAt { point, epochs }) => {
                    format!("p{p} crash {point} +{epochs}")
                }
                Some(Disruption::Kill { after_ms }) => format!("p{p} kill -9 at {after_ms} ms"),
                Some(Disruption::DamageNewest) => "damage the newest checkpoint".into(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The newest epoch directory under the pipeline's checkpoints (0 when none).
fn newest_epoch(state: &Path, pipeline: &str) -> u64 {
    let Ok(entries) = std::fs::read_dir(state.join(pipeline).join("checkpoints")) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("epoch="))
                .and_then(|n| n.parse().ok())
        })
        .max()
        .unwrap_or(0)
}

/// Truncates the first state file in the newest epoch directory that has a manifest,
/// when an older checkpoint is left to fall back to. Files in an epoch's own directory
/// are written by it (a reused file lives in the directory of the epoch that wrote it),
/// so only the newest checkpoint is damaged.
fn damage_newest(state: &Path, pipeline: &str) {
    let dir = state.join(pipeline).join("checkpoints");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut with_manifest: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("_manifest.json").exists())
        .collect();
    with_manifest.sort();
    if with_manifest.len() < 2 {
        return;
    }
    let newest = with_manifest.last().unwrap();
    let mut files: Vec<_> = walk(newest)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .collect();
    files.sort();
    if let Some(file) = files.first() {
        std::fs::write(file, b"").unwrap();
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Runs every attempt of `schedule` on `sql` with checkpoints into `state`. Returns
/// the last attempt's stderr, or what went wrong (an attempt that should have finished
/// did not).
pub fn run(sql: &Path, state: &Path, schedule: &Schedule) -> Result<String, String> {
    let pipeline = sql.file_stem().unwrap().to_string_lossy().into_owned();
    let mut last = String::new();
    for (i, (parallelism, disruption)) in schedule.attempts.iter().enumerate() {
        if let Some(Disruption::DamageNewest) = disruption {
            damage_newest(state, &pipeline);
            continue;
        }
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_riffle"));
        cmd.arg("run")
            .arg(sql)
            .args(["--parallelism", &parallelism.to_string()])
            .args([
                "--checkpoint-interval",
                "100ms",
                "--restart",
                "none",
                "--state",
            ])
            .arg(state)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        match disruption {
            None => {
                let output = cmd.output().unwrap();
                last = String::from_utf8_lossy(&output.stderr).into_owned();
                if !output.status.success() {
                    return Err(format!(
                        "attempt {} (p{parallelism}) failed: {}\n{last}",
                        i + 1,
                        output.status
                    ));
                }
            }
            Some(Disruption::CrashAt { point, epochs }) => {
                let at = newest_epoch(state, &pipeline) + epochs;
                // Whether it reaches the epoch or finishes first, both are fine here.
                let output = cmd
                    .env("RIFFLE_CRASH_AT", format!("{point}:{at}"))
                    .output()
                    .unwrap();
                last = String::from_utf8_lossy(&output.stderr).into_owned();
            }
            Some(Disruption::DamageNewest) => {}
            Some(Disruption::Kill { after_ms }) => {
                let mut child = cmd.spawn().unwrap();
                std::thread::sleep(Duration::from_millis(*after_ms));
                let _ = child.kill(); // SIGKILL; it may have finished already
                let output = child.wait_with_output().unwrap();
                last = String::from_utf8_lossy(&output.stderr).into_owned();
            }
        }
    }
    Ok(last)
}
