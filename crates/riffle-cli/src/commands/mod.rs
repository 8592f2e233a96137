//! One module per subcommand.

pub mod bench;
pub mod bench_state_memory;
pub mod bench_workers;
pub mod certificates;
pub mod checkpointing;
pub mod checkpoints;
pub mod execute;
pub mod launcher;
pub mod nexmark;
pub mod pipeline;
pub mod run;
pub mod savepoint;
pub mod state;
pub mod worker;
