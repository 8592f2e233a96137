//! OVER over upserts (an updating input keyed by its key, such as a Top-N's): each
//! partition keeps its current rows in order. A row that arrives replaces the row of
//! its key, possibly moving; every row from the first place that changed to the end
//! of the partition is emitted again with its aggregate, keyed as the input was, so the
//! newest row per key is always the batch answer over the current rows. Only `ROWS`
//! frames: over updates, order values need not be times.
//!
//! Snapshots are incremental (docs/state-format.md, "Incremental checkpoints"): after the
//! first, one adds the partitions changed since the last, each whole, to the earlier
//! batches; a restore upserts them in order, so a key's later row replaces its earlier.

use super::{Acc, OverConfig, OverFrame};
use crate::aggregate::GroupKeys;
use crate::delta_log::DeltaLog;
use crate::window::{keyed_rows_state, state_columns, whole_rows, with_row_key};
use datafusion_common::ScalarValue;
use riffle_core::arrow::array::ArrayRef;
use riffle_core::arrow::compute::SortOptions;
use riffle_core::arrow::row::{OwnedRow, RowConverter, SortField};
use riffle_core::{
    CommittedEpoch, Epoch, Operator, OperatorContext, OperatorState, RecordBatch, Result,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Where a row sits in its partition: its order, then its key (ties by key).
type Place = (Box<[u8]>, Box<[u8]>);

/// Where a key's current row is.
struct Placed {
    partition: u32,
    order: Box<[u8]>,
}

/// A current row: the inputs of every aggregate, and the whole row.
struct Current {
    args: Vec<ScalarValue>,
    row: OwnedRow,
}

pub(super) struct UpdatingOver {
    config: Arc<OverConfig>,
    key: Vec<usize>,
    order: Vec<usize>,
    partitions: GroupKeys,
    /// Per partition id: its rows in order.
    parts: Vec<BTreeMap<Place, Current>>,
    /// Each key's partition and order, to find the row an upsert replaces.
    places: HashMap<Box<[u8]>, Placed>,
    order_rows: RowConverter,
    key_rows: RowConverter,
    rows: RowConverter,
    max_parallelism: u16,
    operator: String,
    /// What earlier snapshots wrote, and the partitions changed since.
    delta: DeltaLog,
    /// The newest committed epoch heard: the delta log stops holding what it wrote.
    committed: CommittedEpoch,
}

impl UpdatingOver {
    pub(super) fn new(
        config: Arc<OverConfig>,
        key: &[usize],
        order: &[(usize, SortOptions)],
        ctx: &OperatorContext,
    ) -> Result<Self> {
        let field = |i: usize| config.input.schema.field(i).data_type().clone();
        let order_rows = RowConverter::new(
            order
                .iter()
                .map(|(i, o)| SortField::new_with_options(field(*i), *o))
                .collect(),
        )?;
        let key_rows = RowConverter::new(key.iter().map(|&i| SortField::new(field(i))).collect())?;
        let rows = whole_rows(&config.input)?;
        Ok(Self {
            partitions: config.partitions()?,
            config,
            key: key.to_vec(),
            order: order.iter().map(|(i, _)| *i).collect(),
            parts: Vec::new(),
            places: HashMap::new(),
            order_rows,
            key_rows,
            rows,
            max_parallelism: ctx.max_parallelism,
            operator: ctx.operator_id.0.clone(),
            delta: DeltaLog::default(),
            committed: ctx.committed.clone(),
        })
    }

    /// Puts every row of `batch` in place; returns, per partition that changed, the
    /// first place that changed.
    fn upsert(&mut self, batch: &RecordBatch) -> Result<Vec<(u32, Place)>> {
        let n = batch.num_rows();
        let columns = |idx: &[usize]| -> Vec<ArrayRef> {
            idx.iter().map(|&i| batch.column(i).clone()).collect()
        };
        let mut ids = Vec::with_capacity(n);
        let all: Vec<u32> = (0..n as u32).collect();
        self.partitions
            .intern(&columns(&self.config.partition), &all, &mut ids)?;
        if self.parts.len() < self.partitions.len() {
            self.parts.resize_with(self.partitions.len(), BTreeMap::new);
        }
        let orders = self.order_rows.convert_columns(&columns(&self.order))?;
        let keys = self.key_rows.convert_columns(&columns(&self.key))?;
        let rows = self.rows.convert_columns(batch.columns())?;
        let mut changed: HashMap<u32, Place> = HashMap::new();
        for (r, &id) in ids.iter().enumerate() {
            let key: Box<[u8]> = keys.row(r).as_ref().into();
            let place: Place = (orders.row(r).as_ref().into(), key.clone());
            let mut first = place.clone();
            if let Some(placed) = self.places.remove(&key) {
                let old: Place = (placed.order, key.clone());
                self.parts[placed.partition as usize].remove(&old);
                first = first.min(old);
            }
            let args = self
                .config
                .aggregates
                .iter()
                .map(|(_, column, _)| match column {
                    Some(c) => Ok(ScalarValue::try_from_array(batch.column(*c), r)?),
                    None => Ok(ScalarValue::Null),
                })
                .collect::<Result<Vec<_>>>()?;
            self.parts[id as usize].insert(
                place.clone(),
                Current {
                    args,
                    row: rows.row(r).owned(),
                },
            );
            self.places.insert(
                key,
                Placed {
                    partition: id,
                    order: place.0,
                },
            );
            changed
                .entry(id)
                .and_modify(|p| {
                    if first < *p {
                        *p = first.clone();
                    }
                })
                .or_insert(first);
        }
        let mut changed: Vec<(u32, Place)> = changed.into_iter().collect();
        changed.sort();
        let ids: Vec<u32> = changed.iter().map(|(id, _)| *id).collect();
        self.delta.touch(&ids);
        Ok(changed)
    }

    /// The rows from each listed place to the end of its partition, with their
    /// aggregates.
    fn emit(&self, from: &[(u32, Place)]) -> Result<Option<RecordBatch>> {
        let aggregates = &self.config.aggregates;
        let mut picked = Vec::new();
        let mut values: Vec<Vec<ScalarValue>> = vec![Vec::new(); aggregates.len()];
        for (id, start) in from {
            let part = &self.parts[*id as usize];
            // The frame: the rows before `start` it reaches, then each row in turn.
            let reach = match self.config.frame {
                OverFrame::Rows(Some(n)) => n,
                _ => usize::MAX,
            };
            let mut frame: std::collections::VecDeque<&Current> = part
                .range(..start.clone())
                .rev()
                .take(reach)
                .map(|(_, c)| c)
                .collect();
            frame.make_contiguous().reverse();
            for (_, current) in part.range(start.clone()..) {
                frame.push_back(current);
                while frame.len() > reach.saturating_add(1) {
                    frame.pop_front();
                }
                for (k, (f, _, ty)) in aggregates.iter().enumerate() {
                    let mut acc = Acc::default();
                    for c in &frame {
                        acc.add(*f, &c.args[k])?;
                    }
                    values[k].push(acc.finish(*f, ty)?);
                }
                picked.push(current.row.row());
            }
        }
        if picked.is_empty() {
            return Ok(None);
        }
        let input = self.rows.convert_rows(picked)?;
        let mut columns: Vec<ArrayRef> = self
            .config
            .output_fields()
            .iter()
            .map(|&i| input[i].clone())
            .collect();
        for v in values {
            columns.push(ScalarValue::iter_to_array(v)?);
        }
        columns.push(input[self.config.input.timestamp_index].clone());
        Ok(Some(RecordBatch::try_new(
            self.config.schema.schema.clone(),
            columns,
        )?))
    }
}

impl UpdatingOver {
    /// Every current row of the partitions `ids`, keyed by its partition's key group,
    /// as a state batch whose rows are identified by the input's key.
    fn state_batch(&self, ids: &[u32]) -> Result<RecordBatch> {
        let rows: Vec<_> = ids
            .iter()
            .flat_map(|&id| self.parts[id as usize].values().map(|c| c.row.row()))
            .collect();
        let columns = self.rows.convert_rows(rows)?;
        let batch = keyed_rows_state(
            &self.config.input,
            columns,
            &self.config.partition,
            Vec::new(),
            self.max_parallelism,
        )?;
        let row_key: Vec<&str> = self
            .key
            .iter()
            .map(|&i| self.config.input.schema.field(i).name().as_str())
            .collect();
        with_row_key(batch, &row_key)
    }
}

impl Operator for UpdatingOver {
    fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        let changed = self.upsert(&batch)?;
        if let Some(batch) = self.emit(&changed)? {
            out.push(batch);
        }
        Ok(())
    }

    fn snapshot(&mut self, epoch: Epoch) -> Result<OperatorState> {
        self.delta
            .hand_over_committed(epoch, self.committed.newest());
        let len = self.parts.len();
        let ids = self.delta.take_changed(len);
        let batch = (!ids.is_empty())
            .then(|| self.state_batch(&ids))
            .transpose()?;
        Ok(self.delta.state_after(batch, len))
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        for batch in state.batches {
            let columns = state_columns(&batch, self.config.input.schema.fields(), &self.operator)?;
            let rows = RecordBatch::try_new(self.config.input.schema.clone(), columns)?;
            self.upsert(&rows)?;
        }
        Ok(())
    }
}
