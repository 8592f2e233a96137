//! Lookup tables ([`riffle_core::LookupTable`]): files read whole when a job starts, and
//! PostgreSQL tables queried per batch of keys with an optional cache.

mod cache;
mod files;
mod keys;

pub use cache::LookupCache;
pub use files::FileLookupFactory;
pub(crate) use keys::{has_null, KeyRows};
