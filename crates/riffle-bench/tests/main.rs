//! riffle-bench's integration tests, in one executable: one link instead of one
//! per file. Each module was an executable of its own; `cargo test --test bench --
//! <module>::` runs one of them.

mod common;

mod file_source;
mod nexmark_reference;
mod sql_equivalence;
