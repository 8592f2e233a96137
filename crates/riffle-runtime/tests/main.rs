//! riffle-runtime's integration tests, in one executable: one link instead of one
//! per file. Each module was an executable of its own; `cargo test --test runtime --
//! <module>::` runs one of them.

mod common;

mod checkpoints;
mod event_time;
mod execution;
mod handed_over;
mod restart_budget;
mod restarts;
mod restored_state;
mod savepoints;
mod simulation;
