//! The `riffle` command-line tool.

mod allocator;
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
    /// Run one worker process of a SQL pipeline spread over several (docs/cluster.md).
    Worker(commands::worker::WorkerArgs),
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
    /// Make the certificates workers on several machines speak mutual TLS with.
    Certificates(commands::certificates::CertificatesArgs),
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
    if prints_reports(&cli.command) {
        end_quietly_on_closed_pipe();
    }
    let result = match cli.command {
        Command::Run(args) => commands::run::run(args),
        Command::Worker(args) => commands::worker::run(args),
        Command::Explain(args) => commands::run::explain(args),
        Command::Nexmark(args) => commands::nexmark::run(args),
        Command::Bench(args) => commands::bench::run(args),
        Command::Checkpoints(args) => commands::checkpoints::run(args),
        Command::Savepoint(args) => commands::savepoint::run(args),
        Command::State(args) => commands::state::run(args),
        Command::Certificates(args) => commands::certificates::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_chain(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// The error and its causes, `outer: inner: …`, leaving out a cause whose text the
/// message already holds (typed errors often print their source themselves).
/// Commands that print a report and run no job: `riffle bench … | head` should stop
/// when `head` does, not panic on the closed pipe.
fn prints_reports(command: &Command) -> bool {
    matches!(
        command,
        Command::Bench(_)
            | Command::Explain(_)
            | Command::Checkpoints(_)
            | Command::Savepoint(_)
            | Command::State(_)
    )
}

/// Lets a write to a closed stdout end the process quietly, as it does `ls` or `cat`
/// (Rust ignores SIGPIPE, so `println!` would panic instead). Sockets are unaffected:
/// they are written with `MSG_NOSIGNAL`.
fn end_quietly_on_closed_pipe() {
    // SAFETY: called once at start, before any thread is spawned; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn error_chain(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&cause);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    #[test]
    fn a_cause_is_printed_once() {
        // Its message holds its source already.
        let io = riffle_core::Error::Io {
            path: "state/x".into(),
            source: std::io::Error::other("disk full"),
        };
        let e = anyhow::Error::new(io).context("job.sql failed");
        assert_eq!(
            error_chain(&e),
            "job.sql failed: I/O error on state/x: disk full"
        );
        let plain = anyhow::Error::new(std::io::Error::other("disk full")).context("writing");
        assert_eq!(error_chain(&plain), "writing: disk full");
    }
}
