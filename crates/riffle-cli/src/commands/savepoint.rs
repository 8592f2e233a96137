//! `riffle savepoint create | list | show | delete | export | import | check`.

use super::checkpointing::open_store;
use super::pipeline::QueryArgs;
use crate::units::{event_time, parse_duration};
use anyhow::{Context, Result};
use riffle_control::{find_control, post_savepoint};
use riffle_core::arrow::temporal_conversions::timestamp_ms_to_datetime;
use riffle_runtime::plan_check::PlanCheck;
use riffle_state::archive::{archive_manifest, export_savepoint, import_savepoint};
use riffle_state::savepoints::SavepointFinding;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Arguments of `riffle savepoint`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  riffle savepoint create --stop --pipeline nexmark-q5          # stop a running job with a savepoint\n  riffle savepoint create --stop --drain --label before-upgrade  # fire every window first\n  riffle savepoint list --pipeline nexmark-q5\n  riffle savepoint export before-upgrade -o q5.tar\n  riffle savepoint import q5.tar --state s3://bucket/riffle\n  riffle savepoint check before-upgrade --query q5 --parallelism 4\n  riffle savepoint check sp-000012 --pipeline q5 --sql examples/nexmark/q5.sql --parallelism 4\n  riffle nexmark --query q5 --from-savepoint before-upgrade --parallelism 4 --checkpoint-interval 1s"
)]
pub struct SavepointArgs {
    #[command(subcommand)]
    pub command: SavepointCommand,
    /// Where the pipeline's state lives: a directory, file:///abs/dir, s3://bucket/prefix.
    #[arg(long, global = true, default_value = "./riffle-state")]
    pub state: String,
    /// The pipeline (`nexmark-q5` for `riffle nexmark --query q5`). Default: nexmark-q5;
    /// for `import` the archive's, for `check` the checked pipeline's.
    #[arg(long, global = true)]
    pub pipeline: Option<String>,
}

/// What to do.
#[derive(Debug, clap::Subcommand)]
pub enum SavepointCommand {
    /// Take a savepoint of a running job (found through `{state}/{pipeline}/_control.json`).
    Create {
        /// Its label (default `sp-{epoch}`).
        #[arg(long)]
        label: Option<String>,
        /// Stop the job once the savepoint is taken.
        #[arg(long)]
        stop: bool,
        /// With --stop: sources emit their final watermark first, so every open window
        /// fires and its output is committed with the savepoint.
        #[arg(long, requires = "stop")]
        drain: bool,
        /// How long to wait for the savepoint.
        #[arg(long, default_value = "10m", value_parser = parse_duration)]
        timeout: Duration,
    },
    /// One line per savepoint: epoch, when, parallelism, files, bytes, watermark.
    List,
    /// A savepoint's manifest, as JSON.
    Show {
        /// The label.
        label: String,
    },
    /// Delete a savepoint (refused while a retained checkpoint still reads its files).
    Delete {
        /// The label.
        label: String,
    },
    /// Write a savepoint as a portable tar archive (manifest, state files, checksums).
    Export {
        /// The label.
        label: String,
        /// The archive (default `{label}.tar`).
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Import a savepoint archive into --state (any root: file://, s3://). A truncated or
    /// altered archive is refused and nothing of it is kept.
    Import {
        /// The archive.
        archive: PathBuf,
        /// Label to import it as (default: the label it was exported under).
        #[arg(long)]
        label: Option<String>,
    },
    /// Dry run of a restore: which operators restore (and rescale), which are new, which
    /// would be dropped, and state that no longer fits — without starting the job.
    /// Exits non-zero when the restore would be refused.
    Check {
        /// The label.
        label: String,
        /// The pipeline to check against (as `riffle nexmark` takes it).
        #[command(flatten)]
        pipeline: QueryArgs,
        /// Check a SQL pipeline file instead (`riffle run <file>`), planned at
        /// --parallelism and --max-parallelism.
        #[arg(long, value_name = "FILE")]
        sql: Option<std::path::PathBuf>,
        /// As the run would take it: drop state of operators the pipeline lacks.
        #[arg(long)]
        allow_non_restored_state: bool,
    },
}

fn pipeline_or_default(pipeline: &Option<String>) -> String {
    pipeline.clone().unwrap_or_else(|| "nexmark-q5".into())
}

pub fn run(args: SavepointArgs) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        match args.command {
            SavepointCommand::Create {
                label,
                stop,
                drain,
                timeout,
            } => {
                let pipeline = pipeline_or_default(&args.pipeline);
                let store = open_store(&args.state, &pipeline)?;
                let control = find_control(&store)
                    .await
                    .map_err(anyhow::Error::msg)?
                    .with_context(|| {
                        format!("no running job of `{pipeline}` in {} (it writes _control.json, or _control/worker-N.json on each worker, there while it runs with --checkpoint-interval); check --state and --pipeline", args.state)
                    })?;
                let worker = control
                    .worker
                    .map_or(String::new(), |w| format!("worker {w}, "));
                eprintln!(
                    "riffle: asking `{pipeline}` ({worker}pid {}, {}) for a savepoint{}…",
                    control.pid,
                    control.address,
                    if stop { " and a stop" } else { "" }
                );
                // Taking a savepoint needs the job's token, kept beside the control file.
                let token = store
                    .read_control_token()
                    .await
                    .with_context(|| format!("reading the control token of `{pipeline}`"))?;
                let started = Instant::now();
                let address = control.address.clone();
                let done = tokio::task::spawn_blocking(move || {
                    post_savepoint(
                        &address,
                        token.as_deref(),
                        label.as_deref(),
                        stop,
                        drain,
                        timeout,
                    )
                })
                .await?
                .map_err(|e| {
                    anyhow::anyhow!(
                        "{e}\n(if pid {} is gone, its control file is stale: the job did not exit cleanly)",
                        control.pid
                    )
                })?;
                println!(
                    "savepoint `{}` at epoch {}: {} files, {} bytes, {:.2} s{}",
                    done.label,
                    done.epoch,
                    done.files,
                    done.bytes,
                    started.elapsed().as_secs_f64(),
                    if done.stopped { "; the job stops" } else { "" }
                );
                println!("{}", done.location);
                Ok(())
            }
            SavepointCommand::List => {
                let pipeline = pipeline_or_default(&args.pipeline);
                let store = open_store(&args.state, &pipeline)?;
                let savepoints = store.savepoints().await?;
                if savepoints.is_empty() {
                    println!("no savepoints of `{pipeline}` in {}", args.state);
                    return Ok(());
                }
                println!(
                    "{:<24} {:>7}  {:<23}  {:>11}  {:>5}  {:>12}  watermark (event time, UTC)",
                    "label", "epoch", "taken (UTC)", "parallelism", "files", "bytes"
                );
                for (label, finding) in savepoints {
                    match finding {
                        SavepointFinding::Valid(m) => {
                            let parallelism = m.operators.iter().map(|o| o.parallelism).max().unwrap_or(0);
                            let taken = timestamp_ms_to_datetime(m.written_at_ms)
                                .map_or("?".into(), |t| t.to_string());
                            println!(
                                "{label:<24} {:>7}  {taken:<23}  {parallelism:>11}  {:>5}  {:>12}  {}",
                                m.epoch.0,
                                m.files().count(),
                                m.files().map(|f| f.bytes).sum::<u64>(),
                                m.watermark.map_or("-".into(), event_time)
                            );
                        }
                        SavepointFinding::Incomplete => println!(
                            "{label:<24} INCOMPLETE (no manifest: never finished; `riffle savepoint delete {label}` removes it)"
                        ),
                        SavepointFinding::Damaged(e) => println!("{label:<24} DAMAGED: {e}"),
                    }
                }
                Ok(())
            }
            SavepointCommand::Show { label } => {
                let pipeline = pipeline_or_default(&args.pipeline);
                let store = open_store(&args.state, &pipeline)?;
                let manifest = store.read_savepoint(&label).await?.with_context(|| {
                    format!("no savepoint `{label}` of `{pipeline}`; `riffle savepoint list` shows what exists")
                })?;
                println!("{}", serde_json::to_string_pretty(&manifest)?);
                Ok(())
            }
            SavepointCommand::Delete { label } => {
                let pipeline = pipeline_or_default(&args.pipeline);
                let store = open_store(&args.state, &pipeline)?;
                let deleted = store.delete_savepoint(&label).await?;
                println!("deleted savepoint `{label}` ({deleted} objects)");
                Ok(())
            }
            SavepointCommand::Export { label, output } => {
                let pipeline = pipeline_or_default(&args.pipeline);
                let store = open_store(&args.state, &pipeline)?;
                let path = output.unwrap_or_else(|| PathBuf::from(format!("{label}.tar")));
                let partial = path.with_extension("tar.partial");
                let file = std::fs::File::create(&partial)
                    .with_context(|| format!("creating {}", partial.display()))?;
                let started = Instant::now();
                let result = export_savepoint(
                    &store,
                    &label,
                    std::io::BufWriter::new(file),
                    &path.display().to_string(),
                )
                .await;
                let summary = match result {
                    Ok(summary) => summary,
                    Err(e) => {
                        let _ = std::fs::remove_file(&partial);
                        return Err(e.into());
                    }
                };
                std::fs::rename(&partial, &path)
                    .with_context(|| format!("moving the archive to {}", path.display()))?;
                let seconds = started.elapsed().as_secs_f64();
                println!(
                    "exported savepoint `{label}` to {}: {} state files, {} bytes in {seconds:.2} s ({:.0} MB/s)",
                    path.display(),
                    summary.files,
                    summary.bytes,
                    summary.bytes as f64 / seconds.max(1e-9) / 1e6
                );
                Ok(())
            }
            SavepointCommand::Import { archive, label } => {
                let file = std::fs::File::open(&archive)
                    .with_context(|| format!("opening {}", archive.display()))?;
                let pipeline = match &args.pipeline {
                    Some(p) => p.clone(),
                    None => {
                        let first = std::fs::File::open(&archive)
                            .with_context(|| format!("opening {}", archive.display()))?;
                        let name = archive.display().to_string();
                        archive_manifest(std::io::BufReader::new(first), &name)?.pipeline
                    }
                };
                let store = open_store(&args.state, &pipeline)?;
                let manifest = import_savepoint(
                    &store,
                    std::io::BufReader::new(file),
                    &archive.display().to_string(),
                    label.as_deref(),
                )
                .await?;
                println!(
                    "imported savepoint `{}` of `{pipeline}` (epoch {}, {} files) into {}",
                    manifest.savepoint.as_deref().unwrap_or_default(),
                    manifest.epoch,
                    manifest.files().count(),
                    args.state
                );
                Ok(())
            }
            SavepointCommand::Check {
                label,
                pipeline,
                sql,
                allow_non_restored_state,
            } => {
                let graph = match sql {
                    Some(file) => {
                        super::run::SqlArgs {
                            file,
                            parallelism: pipeline.parallelism,
                            max_parallelism: pipeline.max_parallelism,
                            events: None,
                            throttle: None,
                        }
                        .plan()?
                        .graph
                    }
                    None => pipeline.build(std::sync::Arc::new(
                        riffle_connectors::sinks::BlackholeSinkFactory,
                    ))?,
                };
                let name = args.pipeline.clone().unwrap_or_else(|| graph.name.clone());
                let store = open_store(&args.state, &name)?;
                let manifest = store.read_savepoint(&label).await?.with_context(|| {
                    format!("no savepoint `{label}` of `{name}`; `riffle savepoint list` shows what exists")
                })?;
                let check = PlanCheck::new(&manifest, &graph);
                println!(
                    "savepoint `{label}` (epoch {}) against `{}` at parallelism {}:",
                    manifest.epoch, graph.name, pipeline.parallelism
                );
                println!("{:<24} {:>5}  state", "operator", "files");
                for op in &check.operators {
                    println!("{:<24} {:>5}  {}", op.operator, op.files, op.fate);
                }
                match check.refusal(allow_non_restored_state) {
                    Some(why) => anyhow::bail!("a restore would be refused: {why}"),
                    None => {
                        println!("ok: the pipeline can start from this savepoint");
                        Ok(())
                    }
                }
            }
        }
    })
}
