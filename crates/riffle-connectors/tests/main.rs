//! riffle-connectors' integration tests, in one executable: one link instead of one
//! per file. Each module was an executable of its own; `cargo test --test connectors
//! -- <module>::` runs one of them.

#[path = "support/certs.rs"]
mod certs;

mod file_sink_commit;
mod kafka;
mod postgres_sink;
