//! riffle-iceberg: the `iceberg` sink connector, writing Apache Iceberg tables exactly
//! once (docs/connectors.md, "iceberg").
//!
//! Data files are Parquet written by riffle's own Arrow and Parquet (the iceberg crate
//! depends on an older Arrow major version, so no Arrow value crosses into it); the
//! iceberg crate and its SQL catalog make the snapshots, manifests and table metadata.

mod catalog;
mod codec;
mod data_files;
mod ledger;
mod partition;
mod schema;
mod sink;
mod storage;

pub use catalog::{CatalogConfig, CatalogKind, RestAuth};
pub use codec::Codec;
pub use partition::{transform_name, DeclaredField};
pub use schema::SchemaMismatch;
pub use sink::{IcebergSinkConfig, IcebergSinkFactory};
