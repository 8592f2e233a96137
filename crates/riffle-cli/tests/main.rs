//! riffle-cli's integration tests, in one executable: each links DataFusion, Arrow,
//! librdkafka and the Iceberg crate, so one executable instead of fourteen saves that
//! link (and the shared helpers' compilation) thirteen times in every build. Each
//! module is what was once an executable of its own; `cargo test --test cli -- oracle::`
//! runs one of them.

mod common;

// Real systems' helpers, shared with the connectors' and the state store's tests.
#[path = "../../riffle-connectors/tests/support/certs.rs"]
mod certs;
#[path = "../../riffle-connectors/tests/support/kafka.rs"]
mod kafka;
#[path = "../../riffle-state/tests/support/moto.rs"]
mod moto;
#[path = "../../riffle-connectors/tests/support/postgres.rs"]
mod postgres;

mod cli;
mod cluster;
mod cluster_by_hand;
mod cluster_end;
mod cluster_kubernetes;
mod cluster_partition;
mod connectors;
mod damaged_checkpoints;
mod exactly_once;
mod fencing;
mod flink_docs;
mod nexmark_suite;
mod observability;
mod oracle;
mod partitioned_files;
mod peer_window;
mod s3_state;
mod savepoint_files;
mod savepoints;
mod sql;
