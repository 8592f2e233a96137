//! Top-N per partition (`ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) <= N`): the
//! first `N` rows of each partition in the order, as an updating result keyed by the
//! partition and the rank. After each batch it emits the rows at every rank the batch
//! changed; the input only grows, so ranks are only ever filled or replaced, never
//! emptied, and an upsert per (partition, rank) is the whole result (no retractions).
//! With `N = 1` this is deduplication: the first row of each partition in the order.
//!
//! As a changelog ([`TopNFactory::changelog`], `changelog.rs`) each changed rank's
//! previous row is withdrawn (`-U`) before its new one, so that filters and aggregates
//! can read the result. Over a changelog input (a Top-N of an unwindowed GROUP BY) rows
//! can leave a top: `retract.rs` keeps every row of a partition, not only the first `N`,
//! so that the next row takes a withdrawn row's rank (docs/engine.md, "Changelog
//! streams").
//!
//! Rows that tie in the order keep their arrival order: a new row goes after the rows
//! it ties with (so with `ORDER BY time DESC`, of two rows at the same time the first
//! to arrive stays first).
//!
//! Snapshots are incremental (docs/state-format.md, "Incremental checkpoints"): after the
//! first, one holds only the partitions changed since the last, each whole (every rank),
//! and the earlier batches are handed back unchanged so their files are reused. A restore
//! reads them in order; a partition in a later batch replaces its earlier top.

use crate::aggregate::GroupKeys;
use crate::delta_log::DeltaLog;
mod changelog;
mod retract;

use crate::window::{
    fields_but_timestamp, key_schema, keyed_rows_state, state_columns, take_rows, whole_rows,
    with_row_key, without_column,
};
use changelog::visible_rows;
use riffle_core::arrow::array::{ArrayRef, Int64Array};
use riffle_core::arrow::compute::SortOptions;
use riffle_core::arrow::datatypes::{DataType, Field, SchemaRef};
use riffle_core::arrow::row::{OwnedRow, RowConverter, SortField};
use riffle_core::{
    row_kind_field, CommittedEpoch, Epoch, Error, Operator, OperatorContext, OperatorFactory,
    OperatorState, RecordBatch, Result, StreamKind, StreamSchema,
};
use std::collections::HashMap;
use std::sync::Arc;

/// One `ORDER BY` item: a column and its direction.
#[derive(Debug, Clone)]
pub struct OrderColumn {
    /// Input column.
    pub column: String,
    /// Descending when true.
    pub descending: bool,
    /// NULLs first when true.
    pub nulls_first: bool,
}

impl OrderColumn {
    /// Each item's input column and sort options.
    ///
    /// # Errors
    /// A column `input` does not have.
    pub(crate) fn resolve(
        order: &[OrderColumn],
        input: &StreamSchema,
    ) -> Result<Vec<(usize, SortOptions)>> {
        order
            .iter()
            .map(|o| {
                Ok((
                    input.index_of(&o.column)?,
                    SortOptions {
                        descending: o.descending,
                        nulls_first: o.nulls_first,
                    },
                ))
            })
            .collect()
    }
}

/// Plans a Top-N.
#[derive(Clone)]
pub struct TopNFactory {
    partition: Vec<usize>,
    partition_schema: SchemaRef,
    order: Vec<(usize, SortOptions)>,
    limit: usize,
    input: StreamSchema,
    schema: StreamSchema,
    rank: String,
    /// A Window Top-N: the input column holding each row's window end.
    window_end: Option<usize>,
    /// Emits a changelog (`-U` before `+U`).
    changelog: bool,
    /// The input is a changelog whose batches carry their row kinds in this column; the
    /// rows are kept without it (`input` has none).
    kind_at: Option<usize>,
}

/// The kept rows' columns but the event time, the rank, the row kind of a changelog, and
/// the event time.
fn output_schema(input: &StreamSchema, rank: &str, changelog: bool) -> StreamSchema {
    let mut fields = fields_but_timestamp(input);
    fields.push(Field::new(rank, DataType::Int64, false));
    if changelog {
        fields.push(row_kind_field());
    }
    StreamSchema::with_timestamp(fields)
}

impl TopNFactory {
    /// The first `limit` rows per `partition` in `order`, with their rank (from 1) in a
    /// column named `rank`. Over a changelog `input` the Top-N emits one too.
    ///
    /// # Errors
    /// Unknown columns, no order, a zero limit, or `rank` already an input column.
    pub fn new(
        input: &StreamSchema,
        partition: &[&str],
        order: &[OrderColumn],
        limit: usize,
        rank: &str,
    ) -> Result<Self> {
        if order.is_empty() {
            return Err(Error::plan("a Top-N needs an ORDER BY"));
        }
        if limit == 0 {
            return Err(Error::plan("a Top-N keeps at least one row"));
        }
        if input.index_of(rank).is_ok() {
            return Err(Error::plan(format!("`{rank}` is already an input column")));
        }
        let kind_at = input.row_kind_index();
        let input = &match kind_at {
            Some(at) => without_column(input, at)?,
            None => input.clone(),
        };
        let partition = partition
            .iter()
            .map(|c| input.index_of(c))
            .collect::<Result<Vec<_>>>()?;
        let order = OrderColumn::resolve(order, input)?;
        let partition_schema = key_schema(input, &partition);
        Ok(Self {
            partition,
            partition_schema,
            order,
            limit,
            input: input.clone(),
            schema: output_schema(input, rank, kind_at.is_some()),
            rank: rank.into(),
            window_end: None,
            changelog: kind_at.is_some(),
            kind_at,
        })
    }

    /// The same Top-N emitting a changelog: a [`riffle_core::ROW_KIND_FIELD`] column,
    /// and each changed rank's previous row withdrawn (`-U`) before its new row (`+U`;
    /// `+I` for a rank filled the first time, `-D` for a rank a withdrawal emptied).
    pub fn changelog(mut self) -> Self {
        self.changelog = true;
        self.schema = output_schema(&self.input, &self.rank, true);
        self
    }

    /// Whether it emits a changelog (asked to, or over a changelog input).
    pub fn is_changelog(&self) -> bool {
        self.changelog
    }

    /// A Window Top-N: the partition holds a window (`window_end` names its end
    /// column), and each window's top rows leave once, when the watermark closes it:
    /// an append-only result (`crate::window_top_n`).
    ///
    /// # Errors
    /// `window_end` is not an input column, or not one of the partition's.
    pub fn closing_windows(mut self, window_end: &str) -> Result<Self> {
        if self.changelog {
            return Err(Error::plan(
                "a Window Top-N's rows are final, so it neither reads nor emits a changelog",
            ));
        }
        let end = self.input.index_of(window_end)?;
        if !self.partition.contains(&end) {
            return Err(Error::plan(format!(
                "a Window Top-N partitions by its window; `{window_end}` is not in the PARTITION BY"
            )));
        }
        self.window_end = Some(end);
        Ok(self)
    }

    /// The input's schema.
    pub(crate) fn input_schema(&self) -> &StreamSchema {
        &self.input
    }

    /// Row bytes of the order columns, which compare as the order does.
    fn order_converter(&self) -> Result<RowConverter> {
        let order_fields = self
            .order
            .iter()
            .map(|(i, o)| {
                SortField::new_with_options(self.input.schema.field(*i).data_type().clone(), *o)
            })
            .collect();
        Ok(RowConverter::new(order_fields)?)
    }

    /// One partition set's Top-N (a whole operator's, or one window's).
    pub(crate) fn top_n(&self, ctx: &OperatorContext) -> Result<TopN> {
        Ok(TopN {
            partition: self.partition.clone(),
            order: self.order.iter().map(|(i, _)| *i).collect(),
            limit: self.limit,
            partitions: GroupKeys::new(self.partition_schema.clone())?,
            order_rows: self.order_converter()?,
            rows: whole_rows(&self.input)?,
            tops: Vec::new(),
            input: self.input.clone(),
            schema: self.schema.clone(),
            rank: self.rank.clone(),
            max_parallelism: ctx.max_parallelism,
            operator: ctx.operator_id.0.clone(),
            delta: DeltaLog::default(),
            committed: ctx.committed.clone(),
            changelog: self.changelog,
        })
    }
}

impl OperatorFactory for TopNFactory {
    fn describe(&self) -> String {
        let name = |i: usize| self.input.schema.field(i).name().clone();
        let partition: Vec<String> = self.partition.iter().map(|&i| name(i)).collect();
        let order: Vec<String> = self
            .order
            .iter()
            .map(|(i, o)| format!("{}{}", name(*i), if o.descending { " DESC" } else { "" }))
            .collect();
        let closing = if self.window_end.is_some() {
            ", each window once it closes"
        } else if self.kind_at.is_some() {
            ", over a changelog, changelog -U/+U"
        } else if self.changelog {
            ", changelog -U/+U"
        } else {
            ""
        };
        format!(
            "top {} by ({}) order by {} as {}{closing}",
            self.limit,
            partition.join(", "),
            order.join(", "),
            self.rank
        )
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn output_kind(&self, _: &[StreamKind]) -> StreamKind {
        match (self.changelog, self.window_end) {
            (true, _) => StreamKind::Changelog,
            (false, Some(_)) => StreamKind::AppendOnly,
            (false, None) => StreamKind::Upsert,
        }
    }
    fn is_stateful(&self) -> bool {
        true
    }
    fn stable_state(&self) -> bool {
        // An unwindowed Top-N hands back its earlier snapshot batches; a window's state
        // is written whole (it lives only until the window closes), and so is a Top-N
        // over a changelog (a partition its withdrawals emptied has no row to replace its
        // earlier top with).
        self.window_end.is_none() && self.kind_at.is_none()
    }
    fn key_columns(&self, _: usize) -> Option<Vec<usize>> {
        Some(self.partition.clone())
    }
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(match (self.window_end, self.kind_at) {
            (Some(end), _) => Box::new(crate::window_top_n::WindowTopN::new(self, end, ctx)?),
            (None, Some(at)) => Box::new(retract::RetractTopN::new(self, at, ctx)?),
            (None, None) => Box::new(self.top_n(ctx)?),
        })
    }
}

/// Each row's partition id (the `partition` columns interned in `partitions`), with
/// `tops` grown to one entry per partition seen.
fn partition_ids<T: Default>(
    partitions: &mut GroupKeys,
    partition: &[usize],
    rows: &RecordBatch,
    tops: &mut Vec<T>,
) -> Result<Vec<u32>> {
    let keys: Vec<ArrayRef> = partition.iter().map(|&i| rows.column(i).clone()).collect();
    let all: Vec<u32> = (0..rows.num_rows() as u32).collect();
    let mut ids = Vec::with_capacity(all.len());
    partitions.intern(&keys, &all, &mut ids)?;
    if tops.len() < partitions.len() {
        tops.resize_with(partitions.len(), T::default);
    }
    Ok(ids)
}

/// Kept rows (`columns` of `input`) with their `rank` as a state batch whose rows are
/// identified by the partition and the rank.
fn ranked_state(
    input: &StreamSchema,
    partition: &[usize],
    rank_name: &str,
    columns: Vec<ArrayRef>,
    rank: Vec<i64>,
    max_parallelism: u16,
) -> Result<RecordBatch> {
    let rank: ArrayRef = Arc::new(Int64Array::from(rank));
    let batch = keyed_rows_state(
        input,
        columns,
        partition,
        vec![(Field::new(rank_name, DataType::Int64, false), rank)],
        max_parallelism,
    )?;
    let mut row_key: Vec<&str> = partition
        .iter()
        .map(|&i| input.schema.field(i).name().as_str())
        .collect();
    row_key.push(rank_name);
    with_row_key(batch, &row_key)
}

/// A row kept in a partition's top: its order key and the whole input row.
struct Entry {
    order: OwnedRow,
    row: Held,
}

/// A kept row's values. While a batch is offered, a row that enters a top is held as its
/// index in the batch; once the batch is through, only the rows still in a top are
/// converted to row bytes: most rows of a large partition never enter its top, and
/// converting whole rows (strings and all) was most of a Top-N's time (Nexmark q9).
enum Held {
    Row(OwnedRow),
    Pending(u32),
}

pub(crate) struct TopN {
    partition: Vec<usize>,
    order: Vec<usize>,
    limit: usize,
    partitions: GroupKeys,
    order_rows: RowConverter,
    rows: RowConverter,
    /// Per partition id: its top rows, best first.
    tops: Vec<Vec<Entry>>,
    input: StreamSchema,
    schema: StreamSchema,
    rank: String,
    max_parallelism: u16,
    operator: String,
    /// What earlier snapshots wrote, and the partitions changed since.
    delta: DeltaLog,
    /// The newest committed epoch heard (only when the writer reuses this operator's
    /// files): the delta log stops holding what it wrote.
    committed: CommittedEpoch,
    /// Emits a changelog.
    changelog: bool,
}

/// Per partition changed by a batch, its visible rows (first `N`) before the batch.
pub(crate) type Before = HashMap<u32, Vec<OwnedRow>>;

impl TopN {
    /// Offers every row of `batch` to its partition's top; returns, per partition that
    /// changed (first-changed order), the first rank that changed (from 0).
    pub(crate) fn offer(&mut self, batch: &RecordBatch) -> Result<Vec<(u32, usize)>> {
        self.offer_changes(batch, None)
    }

    /// [`offer`](Self::offer), filling `before` with the first rows of each partition
    /// the batch changes, as they were.
    pub(crate) fn offer_changes(
        &mut self,
        batch: &RecordBatch,
        mut before: Option<&mut Before>,
    ) -> Result<Vec<(u32, usize)>> {
        let ids = partition_ids(&mut self.partitions, &self.partition, batch, &mut self.tops)?;
        let order: Vec<ArrayRef> = self
            .order
            .iter()
            .map(|&i| batch.column(i).clone())
            .collect();
        let order = self.order_rows.convert_columns(&order)?;
        let mut changed: Vec<(u32, usize)> = Vec::new();
        let mut at: HashMap<u32, usize> = HashMap::new();
        for (r, &id) in ids.iter().enumerate() {
            let top = &mut self.tops[id as usize];
            let key = order.row(r);
            // After every row it ties with: the earlier arrival keeps its rank.
            let position = top.partition_point(|e| e.order.row() <= key);
            if position >= self.limit {
                continue;
            }
            if let Some(before) = before.as_deref_mut() {
                if let std::collections::hash_map::Entry::Vacant(e) = before.entry(id) {
                    e.insert(visible_rows(top, self.limit, &self.operator)?);
                }
            }
            top.insert(
                position,
                Entry {
                    order: key.owned(),
                    row: Held::Pending(r as u32),
                },
            );
            top.truncate(self.limit);
            match at.get(&id) {
                Some(&k) => changed[k].1 = changed[k].1.min(position),
                None => {
                    at.insert(id, changed.len());
                    changed.push((id, position));
                }
            }
        }
        self.convert_pending(batch, &changed)?;
        let ids: Vec<u32> = changed.iter().map(|&(id, _)| id).collect();
        self.delta.touch(&ids);
        Ok(changed)
    }

    /// Converts the rows of `batch` still held as indices in the `changed` partitions'
    /// tops to row bytes.
    fn convert_pending(&mut self, batch: &RecordBatch, changed: &[(u32, usize)]) -> Result<()> {
        let mut pending: Vec<u32> = changed
            .iter()
            .flat_map(|&(id, _)| self.tops[id as usize].iter())
            .filter_map(|e| match e.row {
                Held::Pending(r) => Some(r),
                Held::Row(_) => None,
            })
            .collect();
        if pending.is_empty() {
            return Ok(());
        }
        // Each row enters at most once, so after sorting, as many indices as rows are
        // every row: the batch is converted as it is, without a copy.
        pending.sort_unstable();
        let whole = pending.len() == batch.num_rows();
        let rows = if whole {
            self.rows.convert_columns(batch.columns())?
        } else {
            self.rows
                .convert_columns(&take_rows(batch.columns(), &pending)?)?
        };
        for &(id, _) in changed {
            for e in &mut self.tops[id as usize] {
                if let Held::Pending(r) = e.row {
                    let k = if whole {
                        Some(r as usize)
                    } else {
                        pending.binary_search(&r).ok()
                    };
                    if let Some(k) = k {
                        e.row = Held::Row(rows.row(k).owned());
                    }
                }
            }
        }
        Ok(())
    }

    /// The whole top of each partition in `ids`, with ranks, as a state batch whose rows
    /// are identified by the partition and the rank.
    pub(crate) fn state_batch(&self, ids: &[u32]) -> Result<RecordBatch> {
        let all: Vec<(u32, usize)> = ids.iter().map(|&id| (id, 0)).collect();
        let (columns, rank) = self.rows_from(&all)?;
        ranked_state(
            &self.input,
            &self.partition,
            &self.rank,
            columns,
            rank,
            self.max_parallelism,
        )
    }

    /// Every partition's whole top as one state batch.
    pub(crate) fn full_state(&self) -> Result<RecordBatch> {
        let all: Vec<u32> = (0..self.tops.len() as u32).collect();
        self.state_batch(&all)
    }

    /// Restores rows of a state batch (best first per partition): the partitions it holds
    /// lose what earlier batches gave them, as a later snapshot's top replaces an
    /// earlier one's.
    pub(crate) fn restore_rows(&mut self, rows: &RecordBatch) -> Result<()> {
        let ids = partition_ids(&mut self.partitions, &self.partition, rows, &mut self.tops)?;
        for &id in &ids {
            self.tops[id as usize].clear();
        }
        self.offer(rows)?;
        Ok(())
    }

    /// How many partitions it has seen.
    pub(crate) fn partitions(&self) -> usize {
        self.tops.len()
    }

    /// The rows at ranks `from..` of each listed partition, with their rank (from 1).
    pub(crate) fn rows_from(&self, ranks: &[(u32, usize)]) -> Result<(Vec<ArrayRef>, Vec<i64>)> {
        let mut picked = Vec::new();
        let mut rank = Vec::new();
        for &(id, from) in ranks {
            for (k, e) in self.tops[id as usize].iter().enumerate().skip(from) {
                let Held::Row(row) = &e.row else {
                    return Err(Error::State {
                        operator: self.operator.clone(),
                        message: "a kept row was never converted (an earlier batch failed)".into(),
                    });
                };
                picked.push(row.row());
                rank.push(k as i64 + 1);
            }
        }
        Ok((self.rows.convert_rows(picked)?, rank))
    }

    /// Input columns and rank as the output batch (the timestamp last).
    pub(crate) fn output(&self, mut columns: Vec<ArrayRef>, rank: Vec<i64>) -> Result<RecordBatch> {
        let ts = columns.remove(self.input.timestamp_index);
        columns.push(Arc::new(Int64Array::from(rank)));
        columns.push(ts);
        Ok(RecordBatch::try_new(self.schema.schema.clone(), columns)?)
    }
}

impl Operator for TopN {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        if self.changelog {
            return self.on_changes(&batch, out);
        }
        let changed = self.offer(&batch)?;
        if changed.is_empty() {
            return Ok(());
        }
        let (columns, rank) = self.rows_from(&changed)?;
        out.push(self.output(columns, rank)?);
        Ok(())
    }

    fn snapshot(&mut self, epoch: Epoch) -> Result<OperatorState> {
        self.delta
            .hand_over_committed(epoch, self.committed.newest());
        let len = self.tops.len();
        let ids = self.delta.take_changed(len);
        let batch = (!ids.is_empty())
            .then(|| self.state_batch(&ids))
            .transpose()?;
        Ok(self.delta.state_after(batch, len))
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        for batch in state.batches {
            let columns = state_columns(&batch, self.input.schema.fields(), &self.operator)?;
            let rows = RecordBatch::try_new(self.input.schema.clone(), columns)?;
            // Rows come back best first per partition, so ties keep their order.
            self.restore_rows(&rows)?;
        }
        Ok(())
    }
}
