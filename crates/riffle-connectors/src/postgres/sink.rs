//! One PostgreSQL sink subtask: an epoch's rows in one transaction, prepared at the
//! barrier.

use super::types::{quote_ident, quote_table, PgColumn, PgType};
use super::{PostgresSinkConfig, PreparedTransaction, WriteMode};
use crate::io_runtime::block_on;
use crate::sinks::without_timestamp;
use riffle_core::arrow::array::UInt32Array;
use riffle_core::arrow::compute::{concat_batches, take_record_batch};
use riffle_core::arrow::row::{RowConverter, SortField};
use riffle_core::{
    row_kinds, Epoch, Error, RecordBatch, Result, Sink, SinkContext, SinkSummary, StreamSchema,
};
use std::collections::HashMap;
use std::sync::Arc;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::Client;

/// The output columns (all but `_timestamp`) and the PostgreSQL type of each.
pub(super) fn output_columns(schema: &StreamSchema) -> Result<Vec<(String, PgType)>> {
    schema
        .user_fields()
        .map(|f| Ok((f.name().clone(), PgType::of(f)?)))
        .collect()
}

/// One subtask.
pub(super) struct PostgresSink {
    config: PostgresSinkConfig,
    client: Arc<Client>,
    columns: Arc<Vec<(String, PgType)>>,
    ctx: SinkContext,
    /// A transaction is open (exactly-once, rows written since the last barrier).
    in_transaction: bool,
    /// Rows in the open transaction (append) or buffered for it (upsert).
    epoch_rows: u64,
    /// Upsert: the epoch's rows, written at the barrier (only the last per key).
    buffered: Vec<RecordBatch>,
    summary: SinkSummary,
}

impl PostgresSink {
    pub(super) fn new(
        config: PostgresSinkConfig,
        client: Arc<Client>,
        columns: Vec<(String, PgType)>,
        ctx: SinkContext,
    ) -> Self {
        Self {
            config,
            client,
            columns: Arc::new(columns),
            ctx,
            in_transaction: false,
            epoch_rows: 0,
            buffered: Vec::new(),
            summary: SinkSummary::default(),
        }
    }

    /// Runs `statements` (simple query protocol) on the subtask's connection.
    fn execute(&self, statements: String) -> Result<()> {
        let client = self.client.clone();
        let config = self.config.clone();
        block_on(async move {
            client
                .batch_execute(&statements)
                .await
                .map_err(|e| config.db_error(e))
        })?
    }

    fn begin_if_needed(&mut self) -> Result<()> {
        if self.ctx.exactly_once && !self.in_transaction {
            self.execute("BEGIN".into())?;
            self.in_transaction = true;
        }
        Ok(())
    }

    /// Writes `batch` now: COPY (append) or upsert.
    fn send(&mut self, batch: RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.begin_if_needed()?;
        let client = self.client.clone();
        let config = self.config.clone();
        let columns = self.columns.clone();
        let rows = batch.num_rows() as u64;
        block_on(async move {
            match &config.mode {
                WriteMode::Append => copy_rows(&client, &config, &columns, &batch).await,
                WriteMode::Upsert { key } => {
                    upsert_rows(&client, &config, &columns, key, &batch).await
                }
            }
        })??;
        self.summary.rows += rows;
        Ok(())
    }
}

impl Sink for PostgresSink {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let batch = without_timestamp(batch)?;
        match &self.config.mode {
            // Upserts of one epoch are collapsed to the last row per key at the barrier.
            WriteMode::Upsert { .. } if self.ctx.exactly_once => {
                self.epoch_rows += batch.num_rows() as u64;
                self.buffered.push(batch);
                Ok(())
            }
            _ => {
                self.epoch_rows += batch.num_rows() as u64;
                self.send(batch)
            }
        }
    }

    fn pre_commit(&mut self, epoch: Epoch) -> Result<Option<String>> {
        if !self.ctx.exactly_once {
            return Ok(None);
        }
        if !self.buffered.is_empty() {
            let schema = self.buffered[0].schema();
            let all = concat_batches(&schema, &self.buffered)?;
            self.buffered.clear();
            self.send(all)?;
        }
        if !self.in_transaction {
            return Ok(None);
        }
        let transaction = self.config.transaction_id(epoch.0, self.ctx.subtask);
        self.execute(format!(
            "INSERT INTO {} (sink, subtask, epoch) VALUES ('{}', {}, {}) ON CONFLICT DO NOTHING; PREPARE TRANSACTION '{}'",
            quote_table(&self.config.ledger_table),
            self.config.label.replace('\'', "''"),
            self.ctx.subtask,
            epoch.0,
            transaction.replace('\'', "''"),
        ))?;
        self.in_transaction = false;
        let rows = std::mem::take(&mut self.epoch_rows);
        serde_json::to_string(&PreparedTransaction { transaction, rows })
            .map(Some)
            .map_err(|e| Error::external("PostgreSQL sink", e))
    }

    fn finish(&mut self) -> Result<SinkSummary> {
        if self.in_transaction {
            // Rows after the last barrier: replayed after a restart, never committed.
            self.execute("ROLLBACK".into())?;
            self.in_transaction = false;
        }
        Ok(std::mem::take(&mut self.summary))
    }
}

/// Appends `batch` with one binary COPY.
async fn copy_rows(
    client: &Client,
    config: &PostgresSinkConfig,
    columns: &[(String, PgType)],
    batch: &RecordBatch,
) -> Result<()> {
    let names: Vec<String> = columns.iter().map(|(n, _)| quote_ident(n)).collect();
    let statement = format!(
        "COPY {} ({}) FROM STDIN (FORMAT binary)",
        quote_table(&config.table),
        names.join(", ")
    );
    let values = convert(columns, batch)?;
    let sink = client
        .copy_in(&statement)
        .await
        .map_err(|e| config.db_error(e))?;
    let types: Vec<_> = columns.iter().map(|(_, t)| t.postgres()).collect();
    let writer = BinaryCopyInWriter::new(sink, &types);
    futures::pin_mut!(writer);
    let mut row = Vec::with_capacity(values.len());
    for r in 0..batch.num_rows() {
        row.clear();
        row.extend(values.iter().map(|c| c.value(r)));
        writer
            .as_mut()
            .write(&row)
            .await
            .map_err(|e| config.db_error(e))?;
    }
    writer.finish().await.map_err(|e| config.db_error(e))?;
    Ok(())
}

/// Applies `batch` by key, the last row per key winning: one `DELETE` for the keys whose
/// last row withdraws it (`-U`/`-D` of a changelog), one `INSERT … SELECT FROM UNNEST …
/// ON CONFLICT` for the rest.
async fn upsert_rows(
    client: &Client,
    config: &PostgresSinkConfig,
    columns: &[(String, PgType)],
    key: &[String],
    batch: &RecordBatch,
) -> Result<()> {
    let batch = last_per_key(batch, key)?;
    let Some(kinds) = row_kinds(&batch)? else {
        return insert_or_update(client, config, columns, key, &batch).await;
    };
    let (gone, kept): (Vec<u32>, Vec<u32>) =
        (0..batch.num_rows() as u32).partition(|&i| kinds[i as usize].is_retraction());
    if !gone.is_empty() {
        let gone = take_record_batch(&batch, &UInt32Array::from(gone))?;
        delete_keys(client, config, columns, key, &gone).await?;
    }
    if !kept.is_empty() {
        let kept = take_record_batch(&batch, &UInt32Array::from(kept))?;
        insert_or_update(client, config, columns, key, &kept).await?;
    }
    Ok(())
}

/// Deletes the rows whose keys `batch` holds.
async fn delete_keys(
    client: &Client,
    config: &PostgresSinkConfig,
    columns: &[(String, PgType)],
    key: &[String],
    batch: &RecordBatch,
) -> Result<()> {
    let key_columns: Vec<(String, PgType)> = key
        .iter()
        .map(|k| {
            columns
                .iter()
                .find(|(n, _)| n == k)
                .cloned()
                .ok_or_else(|| Error::plan(format!("the sink's input has no key column `{k}`")))
        })
        .collect::<Result<_>>()?;
    let names: Vec<String> = key.iter().map(|k| quote_ident(k)).collect();
    execute_with_arrays(client, config, &key_columns, batch, |arrays| {
        format!(
            "DELETE FROM {} WHERE ({}) IN (SELECT * FROM UNNEST({arrays}))",
            quote_table(&config.table),
            names.join(", "),
        )
    })
    .await
}

/// Inserts the rows of `batch`, each key at most once, replacing a row of the same key.
async fn insert_or_update(
    client: &Client,
    config: &PostgresSinkConfig,
    columns: &[(String, PgType)],
    key: &[String],
    batch: &RecordBatch,
) -> Result<()> {
    let names: Vec<String> = columns.iter().map(|(n, _)| quote_ident(n)).collect();
    let updates: Vec<String> = columns
        .iter()
        .filter(|(n, _)| !key.contains(n))
        .map(|(n, _)| format!("{0} = EXCLUDED.{0}", quote_ident(n)))
        .collect();
    let action = if updates.is_empty() {
        "DO NOTHING".to_string()
    } else {
        format!("DO UPDATE SET {}", updates.join(", "))
    };
    let key: Vec<String> = key.iter().map(|k| quote_ident(k)).collect();
    execute_with_arrays(client, config, columns, batch, |arrays| {
        format!(
            "INSERT INTO {} ({}) SELECT * FROM UNNEST({arrays}) ON CONFLICT ({}) {action}",
            quote_table(&config.table),
            names.join(", "),
            key.join(", ")
        )
    })
    .await
}

/// Runs the statement `statement(arrays)` makes, where `arrays` is `$1::type[], …`: one
/// array parameter per column of `columns`, holding its values in `batch`.
async fn execute_with_arrays(
    client: &Client,
    config: &PostgresSinkConfig,
    columns: &[(String, PgType)],
    batch: &RecordBatch,
    statement: impl FnOnce(&str) -> String,
) -> Result<()> {
    let values = convert(columns, batch)?;
    let arrays: Vec<String> = columns
        .iter()
        .enumerate()
        .map(|(i, (_, t))| format!("${}::{}[]", i + 1, t.sql()))
        .collect();
    let statement = statement(&arrays.join(", "));
    let params: Vec<_> = values.iter().map(PgColumn::as_array).collect();
    client
        .execute(&statement, &params)
        .await
        .map_err(|e| config.db_error(e))?;
    Ok(())
}

fn convert(columns: &[(String, PgType)], batch: &RecordBatch) -> Result<Vec<PgColumn>> {
    columns
        .iter()
        .map(|(name, ty)| {
            let array = batch
                .column_by_name(name)
                .ok_or_else(|| Error::plan(format!("the sink's input has no column `{name}`")))?;
            PgColumn::convert(array, *ty, name)
        })
        .collect()
}

/// The rows of `batch` that are the last of their key (one statement cannot update a
/// row twice), in input order.
fn last_per_key(batch: &RecordBatch, key: &[String]) -> Result<RecordBatch> {
    let mut arrays = Vec::with_capacity(key.len());
    for k in key {
        let array = batch
            .column_by_name(k)
            .ok_or_else(|| Error::plan(format!("the sink's input has no key column `{k}`")))?;
        if array.null_count() > 0 {
            return Err(Error::config(
                k.as_str(),
                "a key column of an upsert sink holds NULL; PostgreSQL keys cannot be NULL",
            ));
        }
        arrays.push(array.clone());
    }
    let converter = RowConverter::new(
        arrays
            .iter()
            .map(|a| SortField::new(a.data_type().clone()))
            .collect(),
    )?;
    let rows = converter.convert_columns(&arrays)?;
    let mut last: HashMap<_, u32> = HashMap::with_capacity(batch.num_rows());
    for (i, row) in rows.iter().enumerate() {
        last.insert(row, i as u32);
    }
    if last.len() == batch.num_rows() {
        return Ok(batch.clone());
    }
    let mut keep: Vec<u32> = last.into_values().collect();
    keep.sort_unstable();
    Ok(take_record_batch(batch, &UInt32Array::from(keep))?)
}
