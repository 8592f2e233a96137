//! riffle-operators' integration tests, in one executable: one link instead of one
//! per file. Each module was an executable of its own; `cargo test --test operators --
//! <module>::` runs one of them.

mod common;

mod aggregates_vs_reference;
mod incremental_snapshots;
mod outer_interval_join;
mod outer_join;
mod over;
mod snapshot_restore;
mod top_n;
mod top_n_changelog;
