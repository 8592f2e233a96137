//! Turning `--checkpoint-interval` / `--state` into a checkpointed, resumable run.

use anyhow::{Context, Result};
use riffle_core::Epoch;
use riffle_runtime::job::JobConfig;
use riffle_runtime::recovery::recover;
use riffle_runtime::{CheckpointConfig, CheckpointReport, JobGraph};
use riffle_state::{CheckpointStore, StateRoot};
use std::sync::Arc;
use std::time::Duration;

/// Everything a checkpointed run starts with.
pub struct Checkpointing {
    pub store: CheckpointStore,
    pub checkpoints: CheckpointConfig,
    pub job_config: JobConfig,
}

/// Opens the state root, recovers the newest usable checkpoint (unless `no_restore`),
/// and says what it resumes from.
pub async fn prepare(
    graph: &JobGraph,
    state: &str,
    interval: Duration,
    no_restore: bool,
) -> Result<Checkpointing> {
    let root =
        StateRoot::parse(state).with_context(|| format!("opening the state root `{state}`"))?;
    let store = CheckpointStore::new(root, &graph.name);
    let mut checkpoints = CheckpointConfig {
        interval,
        ..CheckpointConfig::default()
    };
    let mut job_config = JobConfig::default();
    if no_restore {
        let epochs = store.list_epochs().await.context("listing checkpoints")?;
        checkpoints.first_epoch = Epoch(epochs.last().map_or(0, |e| e.0) + 1);
        eprintln!(
            "riffle: --no-restore: starting from empty state (existing checkpoints are kept)"
        );
        return Ok(Checkpointing {
            store,
            checkpoints,
            job_config,
        });
    }
    let recovered = recover(&store, &graph.fingerprint())
        .await
        .context("recovering from checkpoints")?;
    for (epoch, reason) in &recovered.plan.skipped {
        eprintln!("riffle: skipping damaged checkpoint epoch {epoch}: {reason}");
    }
    if !recovered.plan.partial.is_empty() {
        eprintln!(
            "riffle: swept {} incomplete epoch(s) without a manifest: {:?}",
            recovered.plan.partial.len(),
            recovered
                .plan
                .partial
                .iter()
                .map(|e| e.0)
                .collect::<Vec<_>>()
        );
    }
    checkpoints.first_epoch = recovered.next_epoch;
    checkpoints.generation = recovered.generation;
    match (recovered.manifest, recovered.restored) {
        (Some(manifest), Some(restored)) => {
            let offsets: Vec<String> = manifest
                .operators
                .iter()
                .filter(|o| {
                    graph
                        .nodes()
                        .iter()
                        .any(|n| n.id.0 == o.operator && n.inputs.is_empty())
                })
                .map(|o| format!("{} ({} subtasks)", o.operator, o.subtasks.len()))
                .collect();
            let watermark = manifest
                .watermark
                .map_or("none".to_string(), |w| format!("{w} ns"));
            eprintln!(
                "riffle: resuming `{}` from checkpoint epoch {} (generation {}): source offsets of {}; watermark {watermark}",
                graph.name,
                manifest.epoch,
                manifest.generation,
                offsets.join(", ")
            );
            job_config.restore = Some(Arc::new(restored));
        }
        _ => eprintln!(
            "riffle: no checkpoint of `{}` in {state}; starting from empty state",
            graph.name
        ),
    }
    Ok(Checkpointing {
        store,
        checkpoints,
        job_config,
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Prints checkpoint statistics of a run.
pub fn print_report(report: &CheckpointReport) {
    let mut durations = report.durations.clone();
    durations.sort();
    let bytes: u64 = report.bytes.iter().sum();
    eprintln!(
        "  checkpoints      {} committed, {} abandoned; duration p50 {:?}, p99 {:?}; {:.1} MiB written",
        report.committed.len(),
        report.abandoned.len(),
        percentile(&durations, 0.5),
        percentile(&durations, 0.99),
        bytes as f64 / (1024.0 * 1024.0)
    );
    for e in &report.errors {
        eprintln!("    failed: {e}");
    }
}
