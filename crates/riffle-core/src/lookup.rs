//! Lookup tables: a table a stream reads by key, row by row, while it runs (Flink's
//! `JOIN dim FOR SYSTEM_TIME AS OF t.proc_time`). The join operator asks for the rows
//! matching a batch's keys; where the rows come from (files read once, a database
//! queried and cached) is the table's business. What a table answers is not part of a
//! checkpoint: a replay after a restore asks again and may see newer rows
//! (docs/engine.md, "Lookup joins").

use crate::arrow::array::ArrayRef;
use crate::arrow::datatypes::SchemaRef;
use crate::{RecordBatch, Result};
use std::fmt::Debug;

/// Opens readers of one lookup table.
pub trait LookupTableFactory: Send + Sync + Debug {
    /// What the table is, for `riffle explain` (e.g. `postgres table rates`).
    fn describe(&self) -> String;

    /// The table's columns.
    fn schema(&self) -> SchemaRef;

    /// A reader that matches rows on the columns at `key` (indices into [`Self::schema`]).
    ///
    /// # Errors
    /// The table cannot be read (files missing or malformed, server unreachable).
    fn open(&self, key: &[usize]) -> Result<Box<dyn LookupTable>>;
}

/// One subtask's reader of a lookup table.
pub trait LookupTable: Send {
    /// The rows whose key columns equal each row of `keys` (one array per key column,
    /// of the key columns' types). A key holding a NULL matches nothing.
    ///
    /// # Errors
    /// The table could not be asked (a database error, named).
    fn lookup(&mut self, keys: &[ArrayRef]) -> Result<LookupMatches>;
}

/// The answer to one [`LookupTable::lookup`].
#[derive(Debug, Default)]
pub struct LookupMatches {
    /// Batches of table rows, in the table's schema.
    pub batches: Vec<RecordBatch>,
    /// Per match: the key row, and the batch and row in `batches` that matched it.
    /// Ascending by key row, so a join's output keeps its input's order.
    pub rows: Vec<(usize, usize, usize)>,
}
