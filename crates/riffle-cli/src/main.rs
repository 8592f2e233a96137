//! The `riffle` command-line tool.

mod commands;
mod progress;
mod units;

use clap::{Parser, Subcommand};

/// riffle: an exactly-once stream processor on Arrow, in one binary.
#[derive(Debug, Parser)]
#[command(name = "riffle", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a SQL pipeline file (CREATE TABLE … WITH connector, INSERT INTO … SELECT …).
    Run(commands::run::RunArgs),
    /// Print the dataflow a SQL pipeline file plans to: operators, exchanges, state.
    Explain(commands::run::ExplainArgs),
    /// Run one Nexmark query on the built-in generator, with a live progress line.
    Nexmark(commands::nexmark::NexmarkArgs),
    /// Run Nexmark queries and the peer job and print a benchmark table.
    Bench(commands::bench::BenchArgs),
    /// Inspect checkpoints on storage.
    Checkpoints(commands::checkpoints::CheckpointsArgs),
    /// Take, list, move and check savepoints.
    Savepoint(commands::savepoint::SavepointArgs),
    /// Query checkpointed state with SQL.
    State(commands::state::StateArgs),
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => commands::run::run(args),
        Command::Explain(args) => commands::run::explain(args),
        Command::Nexmark(args) => commands::nexmark::run(args),
        Command::Bench(args) => commands::bench::run(args),
        Command::Checkpoints(args) => commands::checkpoints::run(args),
        Command::Savepoint(args) => commands::savepoint::run(args),
        Command::State(args) => commands::state::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
