//! What the operators keyed by a key of a changelog's rows share — the upsert
//! normalizer (an upsert source's primary key) and the materializer (a keyed table's):
//! the input's rows without their kind column, and which of their columns are the key.

use crate::window::{key_schema, without_column};
use riffle_core::arrow::datatypes::SchemaRef;
use riffle_core::{Error, RecordBatch, Result, StreamSchema};

/// A changelog's rows keyed by some of their columns.
#[derive(Clone)]
pub(crate) struct KeyedChangelog {
    /// The input's columns but the row kind: what a key's rows hold.
    pub rows: StreamSchema,
    /// Where the input holds the row kind.
    pub kind_at: usize,
    /// The key, as columns of `rows`.
    pub keys: Vec<usize>,
    pub key_schema: SchemaRef,
}

impl KeyedChangelog {
    /// `input` keyed by the columns `keys`; `refusals` say what the operator needs when
    /// the input has no row kinds, or no key is given.
    ///
    /// # Errors
    /// An input without row kinds, no key, or a key column it does not have.
    pub fn new(
        input: &StreamSchema,
        keys: &[&str],
        (no_kinds, no_key): (&str, &str),
    ) -> Result<Self> {
        let kind_at = input
            .row_kind_index()
            .ok_or_else(|| Error::plan(no_kinds))?;
        if keys.is_empty() {
            return Err(Error::plan(no_key));
        }
        let rows = without_column(input, kind_at)?;
        let keys = keys
            .iter()
            .map(|k| rows.index_of(k))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            key_schema: key_schema(&rows, &keys),
            keys,
            rows,
            kind_at,
        })
    }

    /// The key columns as the input's, whose row kind may sit before them (the keyed
    /// exchange's).
    pub fn input_keys(&self) -> Vec<usize> {
        (self.keys.iter())
            .map(|&k| if k >= self.kind_at { k + 1 } else { k })
            .collect()
    }

    /// The key columns' names, comma-separated.
    pub fn key_names(&self) -> String {
        (self.key_schema.fields().iter())
            .map(|f| f.name().as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `batch` (of the input) without its kind column at `kind_at`, as rows of `rows`.
pub(crate) fn without_kinds(
    batch: &RecordBatch,
    kind_at: usize,
    rows: &StreamSchema,
) -> Result<RecordBatch> {
    let mut columns = batch.columns().to_vec();
    columns.remove(kind_at);
    Ok(RecordBatch::try_new(rows.schema.clone(), columns)?)
}
