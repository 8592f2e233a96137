//! `riffle checkpoints list | show`: what is on storage.

use crate::units::event_time;
use anyhow::{Context, Result};
use riffle_core::arrow::temporal_conversions::timestamp_ms_to_datetime;
use riffle_core::Epoch;
use riffle_state::recovery::{kept_in_epoch, plan_gc, referenced_files, EpochFinding};
use riffle_state::savepoints::SavepointFinding;
use riffle_state::{CheckpointStore, Manifest, StateRoot};

/// Arguments of `riffle checkpoints`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  riffle checkpoints list --pipeline nexmark-q5\n  riffle checkpoints verify --pipeline nexmark-q5\n  riffle checkpoints gc --dry-run --retain 1\n  riffle checkpoints show 12 --pipeline nexmark-q5 --state ./riffle-state\n  riffle checkpoints history --pipeline nexmark-q5"
)]
pub struct CheckpointsArgs {
    #[command(subcommand)]
    pub command: CheckpointsCommand,
    /// Where checkpoints live: a directory, file:///abs/dir, or s3://bucket/prefix.
    #[arg(long, global = true, default_value = "./riffle-state")]
    pub state: String,
    /// The pipeline (`nexmark-q5` for `riffle nexmark --query q5`).
    #[arg(long, global = true, default_value = "nexmark-q5")]
    pub pipeline: String,
}

/// What to show.
#[derive(Debug, clap::Subcommand)]
pub enum CheckpointsCommand {
    /// One line per epoch: status, time, files, bytes, watermark.
    List,
    /// The manifest of one epoch, as JSON.
    Show {
        /// The epoch.
        epoch: u64,
    },
    /// What each recovery chose and why.
    History,
    /// Checks every retained checkpoint and savepoint (or one epoch): manifests parse
    /// and are consistent, each referenced file exists with its recorded size and
    /// CRC32C and decodes as Parquet; lists files nothing references. Exits non-zero on
    /// damage.
    Verify {
        /// Only this epoch.
        #[arg(conflicts_with = "all")]
        epoch: Option<u64>,
        /// Every checkpoint and savepoint (the default without an epoch).
        #[arg(long)]
        all: bool,
    },
    /// What garbage collection would delete now, and why (`--dry-run` deletes nothing).
    Gc {
        /// Committed checkpoints to keep.
        #[arg(long, default_value_t = 3)]
        retain: usize,
        /// Only print what would be deleted (required: a running job collects its own
        /// garbage).
        #[arg(long)]
        dry_run: bool,
    },
}

/// A timestamp as `2026-11-29 15:10:42.869`, or `?` when out of range.
fn utc(time: Option<impl std::fmt::Display>) -> String {
    time.map_or("?".into(), |t| t.to_string())
}

pub fn run(args: CheckpointsArgs) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let root =
        StateRoot::parse(&args.state).with_context(|| format!("opening `{}`", args.state))?;
    let store = CheckpointStore::new(root, &args.pipeline);
    runtime.block_on(async {
        match args.command {
            CheckpointsCommand::List => {
                let findings = store.findings(false).await?;
                if findings.is_empty() {
                    println!("no checkpoints of `{}` in {}", args.pipeline, args.state);
                    return Ok(());
                }
                // Files of older epochs that a manifest still references (reused state).
                let referenced = referenced_files(&findings, &[]);
                println!(
                    "{:>8}  {:<10} {:<23}  {:>5}  {:>12}  {:>8}  watermark (event time, UTC)",
                    "epoch", "status", "written (UTC)", "files", "bytes", "requests"
                );
                for (epoch, finding) in &findings {
                    match finding {
                        EpochFinding::Valid(m) => {
                            let files = m.files().count();
                            let bytes: u64 = m.files().map(|f| f.bytes).sum();
                            let status = format!("{:?}", m.status).to_uppercase();
                            let watermark = m.watermark.map_or("-".into(), event_time);
                            let written = utc(timestamp_ms_to_datetime(m.written_at_ms));
                            // An epoch a run registered for the state it started from.
                            let from = m
                                .restored_from
                                .as_ref()
                                .map_or(String::new(), |f| format!("  (restored from {f})"));
                            // Object-store requests of writing the epoch (older manifests: -).
                            let requests = m
                                .requests
                                .map_or("-".into(), |r| r.requests().to_string());
                            println!(
                                "{:>8}  {status:<10} {written:<23}  {files:>5}  {bytes:>12}  {requests:>8}  {watermark}{from}",
                                epoch.0
                            );
                        }
                        EpochFinding::Partial => match kept_in_epoch(&referenced, *epoch) {
                            0 => println!("{:>8}  {:<10}", epoch.0, "PARTIAL"),
                            n => println!(
                                "{:>8}  {:<10} {n} state file(s) kept: a newer checkpoint reuses them",
                                epoch.0, "REUSED"
                            ),
                        },
                        EpochFinding::Damaged(e) => {
                            println!("{:>8}  {:<10} {e}", epoch.0, "DAMAGED")
                        }
                    }
                }
                Ok(())
            }
            CheckpointsCommand::Show { epoch } => {
                let manifest = store
                    .read_manifest(Epoch(epoch))
                    .await?
                    .with_context(|| format!("epoch {epoch} of `{}` has no manifest; `riffle checkpoints list` shows what exists", args.pipeline))?;
                println!("{}", serde_json::to_string_pretty(&manifest)?);
                Ok(())
            }
            CheckpointsCommand::Verify { epoch, all: _ } => {
                let epochs = match epoch {
                    Some(e) => vec![Epoch(e)],
                    None => store.list_epochs().await?,
                };
                let mut damaged = 0;
                for epoch in epochs {
                    match store.read_manifest(epoch).await {
                        Ok(Some(m)) => {
                            if !verify_manifest(&store, &format!("epoch {epoch}"), &m).await {
                                damaged += 1;
                            }
                        }
                        Ok(None) => println!(
                            "epoch {epoch}: no manifest (incomplete, or files kept for a later epoch)"
                        ),
                        Err(e) => {
                            damaged += 1;
                            println!("epoch {epoch}: DAMAGED: {e}");
                        }
                    }
                }
                if epoch.is_none() {
                    damaged += verify_savepoints(&store).await?;
                    // Files no manifest references: left by an epoch that never committed
                    // (or by hand). Garbage, not damage: the next run's start-up sweep
                    // deletes them.
                    let findings = store.findings(false).await?;
                    let referenced = referenced_files(&findings, &[]);
                    let manifest_name = "_manifest.json";
                    for (epoch, _) in &findings {
                        for file in store.epoch_files(*epoch).await? {
                            let own = file.ends_with(manifest_name)
                                || file.ends_with(riffle_state::layout::COMMITTED_MARKER);
                            if !referenced.contains(&file) && !own {
                                println!(
                                    "unreachable: {file} (no manifest references it; the next run's start-up sweep deletes it)"
                                );
                            }
                        }
                    }
                }
                anyhow::ensure!(damaged == 0, "{damaged} damaged checkpoint(s)");
                Ok(())
            }
            CheckpointsCommand::Gc { retain, dry_run } => {
                anyhow::ensure!(
                    dry_run,
                    "pass --dry-run: a running job collects its own garbage, so this command only shows what it would delete"
                );
                let findings = store.findings(false).await?;
                let deleting = plan_gc(&findings, retain);
                let keep = referenced_files(&findings, &deleting);
                if deleting.is_empty() {
                    println!("nothing to delete: {retain} newest committed epoch(s) kept");
                }
                for epoch in deleting {
                    let kept = kept_in_epoch(&keep, epoch);
                    let why = match findings.iter().find(|(e, _)| *e == epoch) {
                        Some((_, EpochFinding::Valid(_))) => "older than the retained epochs",
                        Some((_, EpochFinding::Partial)) => "incomplete (no manifest)",
                        _ => "damaged and older than the retained epochs",
                    };
                    println!(
                        "would delete epoch {epoch}: {why}{}",
                        if kept > 0 {
                            format!(" (keeping {kept} file(s) a retained checkpoint reuses)")
                        } else {
                            String::new()
                        }
                    );
                }
                Ok(())
            }
            CheckpointsCommand::History => {
                let records = store.recovery_records().await?;
                if records.is_empty() {
                    println!("no recovery records of `{}` in {}", args.pipeline, args.state);
                }
                for record in records {
                    println!("{}", describe_recovery(&record));
                }
                Ok(())
            }
        }
    })
}

/// Verifies the files of one manifest and prints `{what}: ok (…)` or `{what}: DAMAGED: …`;
/// returns whether it is intact.
async fn verify_manifest(store: &CheckpointStore, what: &str, manifest: &Manifest) -> bool {
    match store.verify(manifest).await {
        Ok(()) => {
            println!(
                "{what}: ok ({} files, {} bytes)",
                manifest.files().count(),
                manifest.files().map(|f| f.bytes).sum::<u64>()
            );
            true
        }
        Err(e) => {
            println!("{what}: DAMAGED: {e}");
            false
        }
    }
}

/// Verifies every savepoint and lists files of savepoint directories that no manifest
/// references; returns how many savepoints are damaged.
async fn verify_savepoints(store: &CheckpointStore) -> Result<usize> {
    let mut damaged = 0;
    for (label, finding) in store.savepoints().await? {
        match finding {
            SavepointFinding::Valid(m) => {
                if !verify_manifest(store, &format!("savepoint {label}"), &m).await {
                    damaged += 1;
                }
                // A savepoint's directory holds its own files only; anything its
                // manifest does not list is left over.
                let referenced: std::collections::HashSet<String> = m.file_paths().collect();
                for file in store.savepoint_files(&label).await? {
                    if !referenced.contains(&file) && !file.ends_with("_manifest.json") {
                        println!("unreachable: {file} (no manifest references it)");
                    }
                }
            }
            SavepointFinding::Damaged(e) => {
                damaged += 1;
                println!("savepoint {label}: DAMAGED: {e}");
            }
            SavepointFinding::Incomplete => println!(
                "savepoint {label}: incomplete (no manifest; never finished): `riffle savepoint delete {label}` removes it"
            ),
        }
    }
    Ok(damaged)
}

/// One recovery record as a line: when, what was restored, and what was cleaned up.
fn describe_recovery(json: &str) -> String {
    let Ok(record) = serde_json::from_str::<serde_json::Value>(json) else {
        return format!("(unreadable record) {json}");
    };
    let at = record["at_ms"]
        .as_i64()
        .and_then(timestamp_ms_to_datetime)
        .map_or("?".into(), |t| t.to_string());
    let mut parts = Vec::new();
    match (
        record["restored_epoch"].as_u64(),
        record["start_empty"].as_bool(),
    ) {
        (_, Some(true)) => parts.push("started empty (--no-restore)".to_string()),
        (Some(epoch), _) => parts.push(format!("restored epoch {epoch}")),
        (None, _) => parts.push("no checkpoint: started empty".to_string()),
    }
    if let Some(from) = record["restored_from"].as_str() {
        parts.push(format!("from {from}"));
    }
    if record["roll_forward"].as_bool() == Some(true) {
        parts.push(format!(
            "rolled PREPARED forward ({} sink commit(s) redone)",
            record["recommitted"]
        ));
    }
    if record["aborted_staged"].as_u64().unwrap_or(0) > 0 {
        parts.push(format!(
            "discarded {} staged output file(s)",
            record["aborted_staged"]
        ));
    }
    if let Some(skipped) = record["skipped_damaged"]
        .as_array()
        .filter(|s| !s.is_empty())
    {
        let list: Vec<String> = skipped
            .iter()
            .map(|s| format!("epoch {} ({})", s[0], s[1].as_str().unwrap_or("?")))
            .collect();
        parts.push(format!("skipped damaged {}", list.join(", ")));
    }
    if let Some(swept) = record["swept_partial"].as_array().filter(|s| !s.is_empty()) {
        parts.push(format!(
            "swept incomplete epochs {}",
            serde_json::Value::Array(swept.clone())
        ));
    }
    if let Some(dropped) = record["dropped_state"].as_array().filter(|s| !s.is_empty()) {
        parts.push(format!(
            "dropped state of {}",
            serde_json::Value::Array(dropped.clone())
        ));
    }
    if let Some(w) = record["watermark"].as_i64() {
        parts.push(format!("watermark {}", event_time(w)));
    }
    format!(
        "{at}  generation {}  {}",
        record["generation"],
        parts.join("; ")
    )
}
