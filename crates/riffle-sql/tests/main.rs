//! riffle-sql's integration tests, in one executable: one link instead of one
//! per file. Each module was an executable of its own; `cargo test --test sql --
//! <module>::` runs one of them.

mod common;

mod changelog_plans;
mod docs_examples;
mod errors;
mod filesystem;
mod max_rows_plans;
