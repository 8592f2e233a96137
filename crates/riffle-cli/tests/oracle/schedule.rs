//! How a case is run: a sequence of `riffle run` processes on one state root, each at
//! its own parallelism, all but the last ended by a crash point of the commit protocol
//! or by `kill -9` at a random moment; the last must finish.
//!
//! An attempt may run the job on several worker processes (`riffle run --workers N`,
//! docs/cluster.md). Then `kill -9` hits one worker: the launcher kills the others and
//! the attempt ends, or, in the last attempt, it starts the worker again, which rejoins
//! the job's next attempt, and the job must still finish.

use rand::rngs::StdRng;
use rand::Rng;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use riffle_runtime::CrashPoint;

use super::workers;

/// What ends one attempt early.
#[derive(Debug, Clone, Copy)]
pub enum Disruption {
    /// Abort at a crash point, this many epochs past the newest one on storage.
    CrashAt { point: &'static str, epochs: u64 },
    /// `kill -9` this long after the start (of one worker, on several workers).
    Kill { after_ms: u64 },
    /// On several workers: `kill -9` of worker `worker` this long after the start; the
    /// launcher starts it again and the job must finish.
    KillWorkerAndRejoin { worker: usize, after_ms: u64 },
    /// No run: truncate a state file that only the newest checkpoint holds, so the
    /// next run must fall back to an older one and replay the epochs after it.
    DamageNewest,
    /// No run: a published output file of a committed checkpoint is moved away, as an
    /// operator emptying the output by mistake. A run then must be refused, naming the
    /// lost epoch, and change nothing; the file is put back and the case goes on.
    LoseOutput,
}

/// One `riffle run` of a case.
#[derive(Debug, Clone, Copy)]
pub struct Attempt {
    pub parallelism: usize,
    /// Worker processes (1: the job runs in the `riffle run` process itself).
    pub workers: usize,
    /// How it ends early (`None`, or a worker killed and rejoined: it must finish).
    pub disruption: Option<Disruption>,
}

impl Attempt {
    /// An attempt in one process.
    pub fn single(parallelism: usize, disruption: Option<Disruption>) -> Self {
        Self {
            parallelism,
            workers: 1,
            disruption,
        }
    }

    /// Whether the attempt must run to the end.
    fn must_finish(&self) -> bool {
        matches!(
            self.disruption,
            None | Some(Disruption::KillWorkerAndRejoin { .. })
        )
    }
}

/// The attempts of one case, in order.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub attempts: Vec<Attempt>,
    /// `--state-memory` of every attempt: a tiny one makes unbounded GROUP BYs spill
    /// and take back groups all the time, through every crash and restore.
    pub state_memory: Option<&'static str>,
}

impl Schedule {
    /// Attempts in one process each.
    pub fn random(rng: &mut StdRng) -> Self {
        let disruptions = rng.random_range(0..=3);
        let mut attempts = Vec::new();
        for _ in 0..disruptions {
            let d = random_disruption(rng);
            attempts.push(Attempt::single(rng.random_range(1..=4), Some(d)));
        }
        attempts.push(Attempt::single(rng.random_range(1..=4), None));
        lose_output_sometimes(&mut attempts, rng);
        Self {
            attempts,
            state_memory: None,
        }
    }

    /// Attempts mostly on 2 or 3 workers (a few in one process, so state moves both
    /// ways between the two), the last one on workers, perhaps with a worker killed.
    pub fn random_on_workers(rng: &mut StdRng) -> Self {
        let disruptions = rng.random_range(0..=2);
        let mut attempts = Vec::new();
        for _ in 0..disruptions {
            let d = random_disruption(rng);
            attempts.push(Attempt {
                parallelism: rng.random_range(1..=4),
                workers: [1, 2, 3][rng.random_range(0..3)],
                disruption: Some(d),
            });
        }
        let workers = rng.random_range(2..=3);
        let disruption = rng
            .random_bool(0.5)
            .then(|| Disruption::KillWorkerAndRejoin {
                worker: rng.random_range(0..workers),
                after_ms: rng.random_range(300..1200),
            });
        attempts.push(Attempt {
            parallelism: rng.random_range(1..=4),
            workers,
            disruption,
        });
        lose_output_sometimes(&mut attempts, rng);
        Self {
            attempts,
            state_memory: None,
        }
    }

    /// One clean run at `parallelism` on `workers`: what a failure shrinks to.
    pub fn clean(parallelism: usize, workers: usize) -> Self {
        Self {
            attempts: vec![Attempt {
                parallelism,
                workers,
                disruption: None,
            }],
            state_memory: None,
        }
    }

    pub fn describe(&self) -> String {
        self.attempts
            .iter()
            .map(|a| {
                let on = match a.workers {
                    1 => format!("p{}", a.parallelism),
                    n => format!("p{} on {n} workers", a.parallelism),
                };
                match a.disruption {
                    None => format!("{on} to the end"),
                    Some(Disruption::CrashAt { point, epochs }) => {
                        format!("{on} crash {point} +{epochs}")
                    }
                    Some(Disruption::Kill { after_ms }) => {
                        format!("{on} kill -9 at {after_ms} ms")
                    }
                    Some(Disruption::KillWorkerAndRejoin { worker, after_ms }) => {
                        format!("{on} kill -9 worker {worker} at {after_ms} ms, rejoin, to the end")
                    }
                    Some(Disruption::DamageNewest) => "damage the newest checkpoint".into(),
                    Some(Disruption::LoseOutput) => {
                        "lose a committed output file, be refused, put it back".into()
                    }
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
            + &self
                .state_memory
                .map(|m| format!("; --state-memory {m}"))
                .unwrap_or_default()
    }
}

/// In a third of the cases with a run before the last, loses output before the last
/// run. Drawn after everything else, so the other draws of older seeds stay as they were.
fn lose_output_sometimes(attempts: &mut Vec<Attempt>, rng: &mut StdRng) {
    if attempts.len() > 1 && rng.random_bool(0.33) {
        let at = attempts.len() - 1;
        attempts.insert(at, Attempt::single(1, Some(Disruption::LoseOutput)));
    }
}

/// A disruption that ends an attempt early.
fn random_disruption(rng: &mut StdRng) -> Disruption {
    if rng.random_bool(0.15) {
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

/// The oldest committed checkpoint that published files (recovery always restores it
/// or a newer one, so it must find its files) and whose output no recovery took back
/// (a fallback past a damaged checkpoint takes back what later epochs published, and
/// manifests name those epochs), and the first file it published.
fn oldest_published_file(state: &Path, pipeline: &str) -> Option<(u64, String)> {
    let mut committed: Vec<_> = std::fs::read_dir(state.join(pipeline).join("checkpoints"))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("_committed.json").exists())
        .collect();
    committed.sort();
    let manifests: Vec<serde_json::Value> = committed
        .iter()
        .filter_map(|dir| {
            serde_json::from_slice(&std::fs::read(dir.join("_manifest.json")).ok()?).ok()
        })
        .collect();
    let taken_back: Vec<u64> = manifests
        .iter()
        .flat_map(|m| m["taken_back"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| e.as_u64())
        .collect();
    manifests.iter().find_map(|manifest| {
        let epoch = manifest["epoch"].as_u64()?;
        if taken_back.contains(&epoch) {
            return None;
        }
        manifest["sink_committables"]
            .as_array()?
            .iter()
            .filter_map(|c| serde_json::from_str::<serde_json::Value>(c["payload"].as_str()?).ok())
            .find_map(|p| Some((epoch, p["files"][0]["target"].as_str()?.to_string())))
    })
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// [`Disruption::LoseOutput`]: moves the oldest committed checkpoint's first published
/// file away, requires that a run is refused naming its epoch and changes neither the
/// output nor the checkpoints, and puts the file back.
fn lose_output(sql: &Path, state: &Path, pipeline: &str) -> Result<(), String> {
    let out = state.with_file_name("out");
    let Some((epoch, name)) = oldest_published_file(state, pipeline) else {
        return Ok(()); // nothing committed yet: nothing to lose
    };
    let (file, aside) = (out.join(&name), state.with_file_name(&name));
    std::fs::rename(&file, &aside).map_err(|e| format!("moving {name} away: {e}"))?;
    // The output and the checkpoints (a refused run still claims a generation).
    let checkpoints = state.join(pipeline).join("checkpoints");
    let before = (listing(&out), walk(&checkpoints));
    let refused = Command::new(env!("CARGO_BIN_EXE_riffle"))
        .arg("run")
        .arg(sql)
        .args(["--parallelism", "1", "--checkpoint-interval", "100ms"])
        .args(["--restart", "none", "--state"])
        .arg(state)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&refused.stderr).into_owned();
    let named = format!("no longer holds epoch(s) {epoch}");
    if refused.status.success() || !text.contains(&named) {
        return Err(format!(
            "with {name} of committed epoch {epoch} gone, the run was not refused naming it:\n{text}"
        ));
    }
    if (listing(&out), walk(&checkpoints)) != before {
        return Err(format!(
            "the refused run changed the output or the checkpoints:\n{text}"
        ));
    }
    std::fs::rename(&aside, &file).map_err(|e| format!("putting {name} back: {e}"))
}

/// Two tables of the case's pipeline naming its one output directory (spelled with a
/// trailing `/.`) must be refused at planning, naming both, and write nothing.
pub fn refuse_two_sinks(sql: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(sql).unwrap();
    let create = text
        .lines()
        .find(|l| l.starts_with("CREATE TABLE out "))
        .ok_or("no sink table in the case")?;
    let (_, select) = text
        .split_once("INSERT INTO out\n")
        .ok_or("no INSERT in the case")?;
    let path = create
        .split("'path' = '")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .ok_or("no path in the sink table")?;
    let twice = format!(
        "{text}{};\nINSERT INTO out_again\n{select}",
        create
            .replacen("CREATE TABLE out ", "CREATE TABLE out_again ", 1)
            .replacen(&format!("'{path}'"), &format!("'{path}/.'"), 1)
            .trim_end_matches(";")
    );
    let doubled = sql.with_file_name("twice.sql");
    std::fs::write(&doubled, &twice).unwrap();
    let refused = Command::new(env!("CARGO_BIN_EXE_riffle"))
        .args(["explain"])
        .arg(&doubled)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    if refused.status.success()
        || !(said.contains("`out`")
            && said.contains("`out_again`")
            && said.contains("name the same output"))
    {
        return Err(format!(
            "two sinks into {path} were not refused at planning:\n{said}\n{twice}"
        ));
    }
    Ok(())
}

/// Runs every attempt of `schedule` on `sql` with checkpoints into `state`. Returns
/// the last attempt's stderr, or what went wrong (an attempt that should have finished
/// did not).
pub fn run(sql: &Path, state: &Path, schedule: &Schedule) -> Result<String, String> {
    let pipeline = sql.file_stem().unwrap().to_string_lossy().into_owned();
    let mut last = String::new();
    for (i, attempt) in schedule.attempts.iter().enumerate() {
        if let Some(Disruption::DamageNewest) = attempt.disruption {
            damage_newest(state, &pipeline);
            continue;
        }
        if let Some(Disruption::LoseOutput) = attempt.disruption {
            lose_output(sql, state, &pipeline)?;
            continue;
        }
        let log = state.with_extension(format!("attempt-{i}.log"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_riffle"));
        cmd.arg("run")
            .arg(sql)
            .args(["--parallelism", &attempt.parallelism.to_string()])
            .args(["--checkpoint-interval", "100ms", "--state"])
            .arg(state);
        if let Some(size) = schedule.state_memory {
            cmd.args(["--state-memory", size]);
        }
        if attempt.workers > 1 {
            cmd.args(["--workers", &attempt.workers.to_string()]);
        }
        match attempt.disruption {
            // The launcher starts the killed worker again; worker 0 restarts the job.
            Some(Disruption::KillWorkerAndRejoin { .. }) => cmd.args(["--restart-delay", "0s"]),
            // A failure ends the attempt (the launcher kills every worker).
            _ => cmd.args(["--restart", "none"]),
        };
        if let Some(Disruption::CrashAt { point, epochs }) = attempt.disruption {
            let at = newest_epoch(state, &pipeline) + epochs;
            // Worker 0 runs the coordinator, which has every crash point.
            cmd.env("RIFFLE_CRASH_AT", format!("{point}:{at}"));
        }
        let mut child = workers::launched(cmd, &log);
        let kill = match attempt.disruption {
            // On workers, which one dies is drawn from the moment.
            Some(Disruption::Kill { after_ms }) => {
                Some((after_ms as usize % attempt.workers, after_ms))
            }
            Some(Disruption::KillWorkerAndRejoin { worker, after_ms }) => Some((worker, after_ms)),
            _ => None,
        };
        if let Some((worker, after_ms)) = kill {
            std::thread::sleep(Duration::from_millis(after_ms));
            // It may have finished already; then there is nothing to kill.
            if attempt.workers == 1 {
                let _ = child.kill(); // SIGKILL
            } else if let Some(&(_, pid)) = workers::worker_pids(&log).get(worker) {
                workers::kill(pid);
            }
        }
        let status = child.wait().unwrap();
        last = std::fs::read_to_string(&log).unwrap_or_default();
        // A crash point may come after the job finished; both are fine here.
        if attempt.must_finish() && !status.success() {
            return Err(format!(
                "attempt {} ({}) failed: {status}\n{last}",
                i + 1,
                Schedule {
                    attempts: vec![*attempt],
                    state_memory: schedule.state_memory,
                }
                .describe()
            ));
        }
    }
    Ok(last)
}
