//! A PostgreSQL table as a lookup table: each batch's distinct keys that the cache does
//! not hold are asked for in one query (`WHERE (k…) IN (SELECT * FROM unnest($1, …))`),
//! and the answers, empty ones included, are cached as Flink's JDBC connector caches
//! them (`lookup.cache.max-rows`, `lookup.cache.ttl`; no cache unless both are set).

use super::connection::connect;
use super::read::rows_to_batch;
use super::types::{quote_ident, quote_table, PgColumn, PgType};
use super::{PostgresSinkConfig, Secret};
use crate::io_runtime::block_on;
use crate::lookup::{KeyRows, LookupCache};
use riffle_core::arrow::array::{ArrayRef, UInt32Array};
use riffle_core::arrow::compute::take;
use riffle_core::arrow::datatypes::{DataType, SchemaRef};
use riffle_core::{LookupMatches, LookupTable, LookupTableFactory, RecordBatch, Result};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_postgres::{Client, Statement};

/// Where a PostgreSQL lookup table is and how its answers are cached.
#[derive(Debug, Clone)]
pub struct PostgresLookupConfig {
    /// `postgres://user@host:port/database` (no password: see `password`).
    pub url: String,
    /// The password, taken from an environment variable by the caller.
    pub password: Option<Secret>,
    /// The table, optionally `schema.table`.
    pub table: String,
    /// At most this many keys' answers, each reused for this long; `None`: no cache.
    pub cache: Option<(usize, Duration)>,
}

/// Opens PostgreSQL lookup readers.
#[derive(Debug)]
pub struct PostgresLookupFactory {
    config: PostgresLookupConfig,
    schema: SchemaRef,
}

impl PostgresLookupFactory {
    /// A lookup of `config.table`'s columns `schema` (read by these names).
    ///
    /// # Errors
    /// A column of a type PostgreSQL values cannot be read as.
    pub fn new(config: PostgresLookupConfig, schema: SchemaRef) -> Result<Self> {
        for field in schema.fields() {
            PgType::of(field)?;
        }
        Ok(Self { config, schema })
    }

    /// The connection settings, as the sink's (for its connect and error helpers).
    fn connection(&self) -> PostgresSinkConfig {
        let mut c = PostgresSinkConfig::new(&self.config.url, &self.config.table, "lookup");
        c.password = self.config.password.clone();
        c
    }

    /// The query for the rows of a set of keys.
    fn query(&self, key: &[usize]) -> Result<String> {
        let columns: Vec<String> = self
            .schema
            .fields()
            .iter()
            .map(|f| {
                Ok(format!(
                    "{}::{}",
                    quote_ident(f.name()),
                    PgType::of(f)?.sql()
                ))
            })
            .collect::<Result<_>>()?;
        let key_names: Vec<String> = key
            .iter()
            .map(|&k| quote_ident(self.schema.field(k).name()))
            .collect();
        let arrays: Vec<String> = key
            .iter()
            .enumerate()
            .map(|(n, &k)| {
                Ok(format!(
                    "${}::{}[]",
                    n + 1,
                    PgType::of(self.schema.field(k))?.sql()
                ))
            })
            .collect::<Result<_>>()?;
        Ok(format!(
            "SELECT {} FROM {} WHERE ({}) IN (SELECT * FROM unnest({}))",
            columns.join(", "),
            quote_table(&self.config.table),
            key_names.join(", "),
            arrays.join(", ")
        ))
    }
}

impl LookupTableFactory for PostgresLookupFactory {
    fn describe(&self) -> String {
        let connection = self.connection();
        match self.config.cache {
            Some((keys, ttl)) => format!(
                "postgres table {} at {} (cache {keys} keys for {ttl:?})",
                self.config.table,
                connection.server()
            ),
            None => format!(
                "postgres table {} at {} (no cache)",
                self.config.table,
                connection.server()
            ),
        }
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn open(&self, key: &[usize]) -> Result<Box<dyn LookupTable>> {
        let connection = self.connection();
        let query = self.query(key)?;
        let (client, statement) = {
            let connection = connection.clone();
            block_on(async move {
                let client = connect(&connection).await?;
                let statement = client
                    .prepare(&query)
                    .await
                    .map_err(|e| connection.db_error(e))?;
                Ok::<_, riffle_core::Error>((client, statement))
            })??
        };
        let types: Vec<DataType> = key
            .iter()
            .map(|&k| self.schema.field(k).data_type().clone())
            .collect();
        let (max_keys, ttl) = self.config.cache.unwrap_or((0, Duration::ZERO));
        Ok(Box::new(PostgresLookup {
            connection,
            client,
            statement,
            schema: self.schema.clone(),
            key: key.to_vec(),
            keys: KeyRows::new(&types)?,
            cache: LookupCache::new(max_keys, ttl),
        }))
    }
}

/// A subtask's connection, prepared query and cache.
struct PostgresLookup {
    connection: PostgresSinkConfig,
    client: Arc<Client>,
    statement: Statement,
    schema: SchemaRef,
    key: Vec<usize>,
    keys: KeyRows,
    cache: LookupCache,
}

impl PostgresLookup {
    /// The table's rows whose keys are among `keys` (distinct keys, one array per key
    /// column).
    fn fetch(&self, keys: &[ArrayRef]) -> Result<RecordBatch> {
        let params: Vec<PgColumn> = keys
            .iter()
            .zip(&self.key)
            .map(|(array, &k)| {
                let field = self.schema.field(k);
                PgColumn::convert(array, PgType::of(field)?, field.name())
            })
            .collect::<Result<_>>()?;
        let (client, statement, connection) = (
            self.client.clone(),
            self.statement.clone(),
            self.connection.clone(),
        );
        let rows = block_on(async move {
            let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                params.iter().map(PgColumn::as_array).collect();
            client
                .query(&statement, &refs)
                .await
                .map_err(|e| connection.db_error(e))
        })??;
        rows_to_batch(&self.schema, &rows)
    }
}

impl LookupTable for PostgresLookup {
    fn lookup(&mut self, keys: &[ArrayRef]) -> Result<LookupMatches> {
        let now = Instant::now();
        let converted = self.keys.rows(keys)?;
        let mut matches = LookupMatches::default();
        // Per distinct key of this batch: the batch and rows answering it, or the first
        // input row holding it while it is still to be asked.
        let mut answers: HashMap<&[u8], (usize, Vec<usize>)> = HashMap::new();
        let mut missing: Vec<u32> = Vec::new();
        let mut missing_at: HashMap<&[u8], usize> = HashMap::new();
        for row in 0..converted.num_rows() {
            if crate::lookup::has_null(keys, row) {
                continue;
            }
            let k = converted.row(row).data();
            if answers.contains_key(k) || missing_at.contains_key(k) {
                continue;
            }
            match self.cache.get(k, now) {
                Some(batch) => {
                    matches.batches.push(batch.clone());
                    answers.insert(
                        k,
                        (matches.batches.len() - 1, (0..batch.num_rows()).collect()),
                    );
                }
                None => {
                    missing_at.insert(k, missing.len());
                    missing.push(row as u32);
                }
            }
        }
        if !missing.is_empty() {
            let indices = UInt32Array::from(missing.clone());
            let asked: Vec<ArrayRef> = keys
                .iter()
                .map(|k| take(k.as_ref(), &indices, None))
                .collect::<std::result::Result<_, _>>()?;
            let found = self.fetch(&asked)?;
            let found_keys: Vec<ArrayRef> =
                self.key.iter().map(|&k| found.column(k).clone()).collect();
            let found_rows = self.keys.rows(&found_keys)?;
            let mut by_key: HashMap<&[u8], Vec<usize>> = HashMap::new();
            for r in 0..found.num_rows() {
                by_key.entry(found_rows.row(r).data()).or_default().push(r);
            }
            matches.batches.push(found.clone());
            let at = matches.batches.len() - 1;
            for (k, _) in missing_at {
                let rows = by_key.remove(k).unwrap_or_default();
                // Each key's own rows, copied out only when a cache will keep them.
                if self.cache.keeps_answers() {
                    let indices = UInt32Array::from_iter_values(rows.iter().map(|&r| r as u32));
                    let answer = take_batch(&found, &indices)?;
                    self.cache.insert(k.into(), answer, now);
                }
                answers.insert(k, (at, rows));
            }
        }
        for row in 0..converted.num_rows() {
            if let Some((batch, rows)) = answers.get(converted.row(row).data()) {
                matches.rows.extend(rows.iter().map(|&r| (row, *batch, r)));
            }
        }
        Ok(matches)
    }
}

/// The rows of `batch` at `indices`.
fn take_batch(batch: &RecordBatch, indices: &UInt32Array) -> Result<RecordBatch> {
    let columns = batch
        .columns()
        .iter()
        .map(|c| take(c.as_ref(), indices, None))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}
