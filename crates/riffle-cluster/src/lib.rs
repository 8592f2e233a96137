//! riffle-cluster: one job on several worker processes (docs/cluster.md).
//!
//! ```text
//!  worker 0                                   worker 1
//!  ┌──────────────────────────┐  Arrow Flight ┌──────────────────────────┐
//!  │ coordinator ── barriers ─┼──────────────▶│ sources                  │
//!  │   ▲ acks ◀───────────────┼───────────────┼─ acks                    │
//!  │ subtasks 0, 2, … ◀──rows─┼──────────────▶│ subtasks 1, 3, …         │
//!  └──────────────────────────┘  (do_put)     └──────────────────────────┘
//! ```
//!
//! Every worker plans the same job; [`riffle_runtime::Placement`] puts subtask `s` of
//! every chain on worker `s % workers`. A channel between subtasks on different workers
//! is an Arrow Flight `do_put` stream; everything else is as in one process.

pub mod ack;
mod attempt;
pub mod error;
mod feeds;
mod leader_silence;
pub mod links;
pub mod protocol;
mod server;
pub mod service;
pub mod tls;
#[cfg(test)]
mod trust_tests;
pub mod wire;
pub mod worker;

pub use error::{ClusterError, ClusterResult};
pub use worker::{run_worker, WorkerOptions, WorkerOutcome};
