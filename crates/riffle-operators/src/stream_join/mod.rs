//! An inner equi-join of two streams: each arrival emits its matches among the rows
//! already seen on the other side (Nexmark q3). Unbounded by default — state grows with
//! the input. With a retention per side ([`StreamJoinFactory::with_retention`], an
//! interval join), a row is dropped once the watermark passes its event time plus its
//! side's retention: no row that arrives in time could still match it.
//! Output: chosen left columns, chosen right columns, `_timestamp` = the later of the
//! two rows' event times.
//!
//! Unbounded joins may be outer ([`StreamJoinFactory::with_outer`]): a row of an outer
//! side with no match yet is emitted padded with NULLs, and withdrawn (`-D`) when its
//! key's first match arrives, just before the joined rows. The output is then a
//! changelog (docs/engine.md, "Changelog streams"); a padded row is never withdrawn
//! again, since rows are never removed from an unbounded join.
//!
//! Interval joins may be outer too ([`StreamJoinFactory::with_outer_interval`]): the
//! operator then checks the time condition itself, remembers which stored rows met it,
//! and emits an outer side's unmatched rows padded when they leave the state
//! (`interval.rs`). That output is append-only; the watermark it passes on is held
//! before the oldest row that may still leave padded.
//!
//! Snapshots are incremental (docs/state-format.md, "Incremental checkpoints"): each stored
//! batch's state batch is made once and handed to every later snapshot unchanged, so a
//! checkpoint writes only the rows that arrived since the last; after `MAX_CHAIN`
//! snapshots a side is written whole again, bounding its files.

mod interval;
mod output;
mod state;

pub use interval::{IntervalCondition, TimeBound};

use crate::aggregate::GroupKeys;
use crate::gather::Referenced;
use interval::MatchedRows;
use riffle_core::arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use riffle_core::arrow::compute::{cast, filter_record_batch};
use riffle_core::arrow::datatypes::{Field, Schema, SchemaRef, TimestampNanosecondType};
use riffle_core::{
    row_kind_field, Epoch, Error, EventTime, Operator, OperatorContext, OperatorFactory,
    OperatorState, RecordBatch, Result, RowKind, StreamSchema,
};
use state::SideSnapshots;
use std::sync::Arc;
use std::time::Duration;

/// The state column of an outer interval join's matched flags.
const MATCHED_FIELD: &str = "matched";

/// Plans a stream-stream equi-join: unbounded or interval, inner or outer.
pub struct StreamJoinFactory {
    sides: [StreamSchema; 2],
    keys: [Vec<usize>; 2],
    outputs: [Vec<usize>; 2],
    key_schema: SchemaRef,
    schema: StreamSchema,
    retention: [Option<i64>; 2],
    /// Per side, whether its unmatched rows are emitted padded (LEFT: the left side).
    outer: [bool; 2],
    /// The time condition an interval join checks per pair itself.
    condition: Option<IntervalCondition>,
}

impl StreamJoinFactory {
    /// An outer interval join: pairs whose times meet `condition` join; a row of a side
    /// marked outer that met no row of the other side is emitted alone, the other
    /// side's columns NULL, once the watermark passes its bound (append-only output).
    /// Rows are kept as long as `condition` lets a row arriving in time match them.
    ///
    /// # Errors
    /// Neither side outer (an inner interval join is [`with_interval`](Self::with_interval)).
    pub fn with_outer_interval(
        mut self,
        left: bool,
        right: bool,
        condition: IntervalCondition,
    ) -> Result<Self> {
        if !(left || right) {
            return Err(Error::plan(
                "an outer interval join needs an outer side; an inner one is built by with_interval",
            ));
        }
        self = self.with_interval(condition);
        self.outer = [left, right];
        self.schema = StreamSchema::with_timestamp(self.padded_fields());
        Ok(self)
    }

    /// An inner interval join that checks `condition` per pair itself (no filter after
    /// it), keeping rows as long as `condition` lets a row arriving in time match them.
    pub fn with_interval(mut self, condition: IntervalCondition) -> Self {
        let (keep_left, keep_right) = condition.retention();
        self = self.with_retention(Some(keep_left), Some(keep_right));
        self.condition = Some(condition);
        self
    }

    /// The output fields, a side's nullable when rows are padded for the other side.
    fn padded_fields(&self) -> Vec<Field> {
        let mut fields: Vec<Field> = Vec::new();
        for side in 0..2 {
            let padded = self.outer[1 - side];
            for &i in &self.outputs[side] {
                let f = self.sides[side].schema.field(i).clone();
                fields.push(if padded { f.with_nullable(true) } else { f });
            }
        }
        fields
    }

    /// The same join, outer on the sides marked: `(true, false)` is a LEFT join,
    /// `(false, true)` a RIGHT join, both a FULL join. The other side's columns become
    /// nullable and the output a changelog.
    ///
    /// # Errors
    /// A join with a retention: an outer interval join is
    /// [`with_outer_interval`](Self::with_outer_interval).
    pub fn with_outer(mut self, left: bool, right: bool) -> Result<Self> {
        if !(left || right) {
            return Ok(self);
        }
        if self.retention.iter().any(Option::is_some) {
            return Err(Error::plan(
                "an outer join with a retention is an outer interval join: use with_outer_interval",
            ));
        }
        self.outer = [left, right];
        let mut fields = self.padded_fields();
        fields.push(row_kind_field());
        self.schema = StreamSchema::with_timestamp(fields);
        Ok(self)
    }

    /// Keeps a left row until the watermark passes its event time + `left`, a right row
    /// until it passes its event time + `right` (`None`: forever). For a join whose
    /// condition bounds `right.time` to `[left.time - a, left.time + b]`, that is
    /// `left = b`, `right = a`.
    pub fn with_retention(mut self, left: Option<Duration>, right: Option<Duration>) -> Self {
        let nanos = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        self.retention = [left.map(nanos), right.map(nanos)];
        self
    }

    /// Joins `left` and `right` where `left_keys` equal `right_keys`.
    ///
    /// # Errors
    /// Unknown columns, unequal key lists, or clashing output names.
    pub fn new(
        left: &StreamSchema,
        right: &StreamSchema,
        left_keys: &[&str],
        right_keys: &[&str],
        left_columns: &[&str],
        right_columns: &[&str],
    ) -> Result<Self> {
        if left_keys.len() != right_keys.len() || left_keys.is_empty() {
            return Err(Error::plan(
                "a join needs the same positive number of keys on both sides",
            ));
        }
        let idx = |s: &StreamSchema, names: &[&str]| {
            names
                .iter()
                .map(|n| s.index_of(n))
                .collect::<Result<Vec<_>>>()
        };
        let keys = [idx(left, left_keys)?, idx(right, right_keys)?];
        let outputs = [idx(left, left_columns)?, idx(right, right_columns)?];
        let mut fields: Vec<Field> = outputs[0]
            .iter()
            .map(|&i| left.schema.field(i).clone())
            .collect();
        fields.extend(outputs[1].iter().map(|&i| right.schema.field(i).clone()));
        for (i, f) in fields.iter().enumerate() {
            if fields[..i].iter().any(|g| g.name() == f.name()) {
                return Err(Error::plan(format!(
                    "join output has two columns named `{}`; rename one side first",
                    f.name()
                )));
            }
        }
        let key_schema = Arc::new(Schema::new(
            keys[0]
                .iter()
                .map(|&i| left.schema.field(i).clone().with_nullable(true))
                .collect::<Vec<_>>(),
        ));
        Ok(Self {
            sides: [left.clone(), right.clone()],
            keys,
            outputs,
            key_schema,
            schema: StreamSchema::with_timestamp(fields),
            retention: [None, None],
            outer: [false, false],
            condition: None,
        })
    }
}

impl OperatorFactory for StreamJoinFactory {
    fn describe(&self) -> String {
        let names = |s: &StreamSchema, k: &[usize]| {
            k.iter()
                .map(|&i| s.schema.field(i).name().clone())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let side_name = match self.outer {
            [true, true] => "full",
            [true, false] => "left",
            _ => "right",
        };
        let kind = match (self.retention, self.outer) {
            ([Some(l), Some(r)], [false, false]) if self.condition.is_some() => format!(
                "interval join (keep left {}, right {}; {})",
                crate::window::display_nanos(l),
                crate::window::display_nanos(r),
                self.condition.map(|c| c.describe()).unwrap_or_default()
            ),
            ([Some(l), Some(r)], _) if self.condition.is_some() => format!(
                "interval {side_name} outer join (keep left {}, right {}; {})",
                crate::window::display_nanos(l),
                crate::window::display_nanos(r),
                self.condition.map(|c| c.describe()).unwrap_or_default()
            ),
            (_, [true, true]) => "unbounded full outer join, changelog".to_string(),
            (_, [true, false]) => "unbounded left outer join, changelog".to_string(),
            (_, [false, true]) => "unbounded right outer join, changelog".to_string(),
            ([None, None], _) => "unbounded join".to_string(),
            ([l, r], _) => {
                let show = |d: Option<i64>| {
                    d.map(crate::window::display_nanos)
                        .unwrap_or_else(|| "forever".into())
                };
                format!("interval join (keep left {}, right {})", show(l), show(r))
            }
        };
        format!(
            "{kind} on ({}) = ({})",
            names(&self.sides[0], &self.keys[0]),
            names(&self.sides[1], &self.keys[1])
        )
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn input_count(&self) -> usize {
        2
    }
    fn is_stateful(&self) -> bool {
        true
    }
    fn stable_state(&self) -> bool {
        // A stored batch's state batch is made once and handed back unchanged, unless
        // it carries matched flags, which change.
        !tracks_matches(self.condition, self.outer)
    }
    fn key_columns(&self, input: usize) -> Option<Vec<usize>> {
        Some(self.keys[input.min(1)].clone())
    }
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Operator>> {
        Ok(Box::new(StreamJoin {
            sides: self.sides.clone(),
            keys: self.keys.clone(),
            outputs: self.outputs.clone(),
            schema: self.schema.clone(),
            table: GroupKeys::for_matchable(&self.key_schema)?,
            key_schema: self.key_schema.clone(),
            stored: [Vec::new(), Vec::new()],
            rows_by_key: [Vec::new(), Vec::new()],
            max_parallelism: ctx.max_parallelism,
            operator: ctx.operator_id.0.clone(),
            retention: self.retention,
            outer: self.outer,
            condition: self.condition,
            matched: Default::default(),
            compacted_at: EventTime::MIN,
            snapshots: Default::default(),
        }))
    }
}

struct StreamJoin {
    sides: [StreamSchema; 2],
    keys: [Vec<usize>; 2],
    outputs: [Vec<usize>; 2],
    schema: StreamSchema,
    table: GroupKeys,
    key_schema: SchemaRef,
    /// Every batch seen, per side.
    stored: [Vec<RecordBatch>; 2],
    /// Per side, per key id: (batch, row) of each stored row.
    rows_by_key: [Vec<Vec<(u32, u32)>>; 2],
    max_parallelism: u16,
    operator: String,
    /// How long past its event time each side's rows are kept (`None`: forever).
    retention: [Option<i64>; 2],
    /// Per side, whether its unmatched rows are emitted padded.
    outer: [bool; 2],
    /// An interval join's time condition, checked per pair.
    condition: Option<IntervalCondition>,
    /// With a condition: per side, its stored rows' times and matched flags (used by
    /// an outer side).
    matched: [MatchedRows; 2],
    /// Watermark of the last compaction.
    compacted_at: EventTime,
    /// Per side, what earlier snapshots handed out.
    snapshots: [SideSnapshots; 2],
}

impl StreamJoin {
    /// Drops rows no future row can match. Runs when the watermark has moved by the
    /// longest retention (at least 1 s) since the last time, so state stays within about
    /// twice the retention while each row is copied a bounded number of times.
    ///
    /// An outer interval join emits here, padded, the dropped rows of its outer sides
    /// that never matched: no row arriving in time can match them any more.
    fn compact(&mut self, watermark: EventTime, out: &mut Vec<RecordBatch>) -> Result<()> {
        let Some(longest) = self.retention.iter().flatten().max().copied() else {
            return Ok(());
        };
        let step = longest.max(1_000 * riffle_core::time::NANOS_PER_MILLI);
        if self.compacted_at != EventTime::MIN && watermark < self.compacted_at.saturating_add(step)
        {
            return Ok(());
        }
        self.compacted_at = watermark;
        let mut kept: [Vec<RecordBatch>; 2] = [Vec::new(), Vec::new()];
        let mut kept_flags: [Vec<Vec<bool>>; 2] = [Vec::new(), Vec::new()];
        for side in 0..2 {
            let batches = std::mem::take(&mut self.stored[side]);
            let flags = self.matched[side].take();
            let Some(keep_for) = self.retention[side] else {
                // Kept whole and in order: their state batches stay valid.
                kept[side] = batches;
                kept_flags[side] = flags;
                continue;
            };
            self.snapshots[side] = SideSnapshots::default();
            let horizon = watermark.saturating_sub(keep_for);
            let pads = self.condition.is_some() && self.outer[side];
            for (i, b) in batches.into_iter().enumerate() {
                let ts = b
                    .column(self.sides[side].timestamp_index)
                    .as_primitive::<TimestampNanosecondType>();
                let keep: Vec<bool> = ts.values().iter().map(|t| *t >= horizon).collect();
                if pads {
                    let unmatched: BooleanArray = (keep.iter().zip(&flags[i]))
                        .map(|(k, m)| Some(!k && !m))
                        .collect();
                    if unmatched.true_count() > 0 {
                        let rows = filter_record_batch(&b, &unmatched)?;
                        out.push(self.padded_batch(side, &rows)?);
                    }
                }
                let mask: BooleanArray = keep.iter().map(|k| Some(*k)).collect();
                let b = filter_record_batch(&b, &mask)?;
                if b.num_rows() == 0 {
                    continue;
                }
                kept[side].push(b);
                if let Some(f) = flags.get(i) {
                    let f = f.iter().zip(&keep).filter(|(_, k)| **k).map(|(m, _)| *m);
                    kept_flags[side].push(f.collect());
                }
            }
        }
        // Rebuild the key index over what is left (matches were emitted already).
        self.table = GroupKeys::for_matchable(&self.key_schema)?;
        self.rows_by_key = [Vec::new(), Vec::new()];
        let mut ignored = Vec::new();
        for (side, batches) in kept.into_iter().enumerate() {
            for b in batches {
                self.index(side, b, &mut ignored, false)?;
            }
            if self.condition.is_some() {
                self.matched[side].restore_flags(std::mem::take(&mut kept_flags[side]));
            }
        }
        Ok(())
    }

    fn key_columns(&self, side: usize, batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
        self.keys[side]
            .iter()
            .zip(self.key_schema.fields())
            .map(|(&i, f)| Ok(cast(batch.column(i), f.data_type())?))
            .collect()
    }

    fn gather(&self, side: usize, column: usize, rows: &Referenced) -> Result<ArrayRef> {
        let arrays: Vec<&dyn Array> = (rows.batches().iter())
            .map(|&b| self.stored[side][b].column(column).as_ref())
            .collect();
        Ok(rows.column(&arrays)?)
    }

    fn add(&mut self, side: usize, batch: RecordBatch, out: &mut Vec<RecordBatch>) -> Result<()> {
        self.index(side, batch, out, true)
    }

    /// Stores `batch` of `side`; with `emit`, first joins it with the other side.
    fn index(
        &mut self,
        side: usize,
        batch: RecordBatch,
        out: &mut Vec<RecordBatch>,
        emit: bool,
    ) -> Result<()> {
        let keys = self.key_columns(side, &batch)?;
        // A NULL key equals nothing, not even another NULL: such a row is never interned
        // or indexed, so it joins no row, and an outer side's is padded for good.
        let ids = self.table.intern_matchable(&keys)?;
        let other = 1 - side;
        for list in &mut self.rows_by_key {
            list.resize_with(self.table.len(), Vec::new);
        }
        let batch_index = self.stored[side].len() as u32;
        let times = self.condition.map(|_| {
            (batch.column(self.sides[side].timestamp_index))
                .as_primitive::<TimestampNanosecondType>()
                .values()
                .clone()
        });
        if let Some(times) = &times {
            self.matched[side].push(times.clone());
        }
        self.stored[side].push(batch);
        // Pairs (this row, other row) as (batch, row) references.
        let mut mine: Vec<(usize, usize)> = Vec::new();
        let mut theirs: Vec<(usize, usize)> = Vec::new();
        // Outer joins: the other side's rows padded until now, and this side's rows
        // with no match, to pad.
        let mut unpadded: Vec<(usize, usize)> = Vec::new();
        let mut padded: Vec<(usize, usize)> = Vec::new();
        for (row, &id) in ids.iter().enumerate() {
            let Some(id) = id else {
                if emit && self.outer[side] && self.condition.is_none() {
                    padded.push((batch_index as usize, row));
                }
                continue;
            };
            if let (true, Some(condition), Some(times)) = (emit, self.condition, &times) {
                // An interval join: only pairs within the bounds join.
                let t = times[row];
                for &(b, r) in &self.rows_by_key[other][id as usize] {
                    let u = self.matched[other].time(b as usize, r as usize);
                    let (left, right) = if side == 0 { (t, u) } else { (u, t) };
                    if condition.holds(left, right) {
                        self.matched[other].mark(b as usize, r as usize);
                        self.matched[side].mark(batch_index as usize, row);
                        mine.push((batch_index as usize, row));
                        theirs.push((b as usize, r as usize));
                    }
                }
            } else if emit {
                let matches = &self.rows_by_key[other][id as usize];
                let first_of_key = self.rows_by_key[side][id as usize].is_empty();
                if self.outer[other] && first_of_key {
                    unpadded.extend(matches.iter().map(|&(b, r)| (b as usize, r as usize)));
                }
                if self.outer[side] && matches.is_empty() {
                    padded.push((batch_index as usize, row));
                }
                for &(b, r) in matches {
                    mine.push((batch_index as usize, row));
                    theirs.push((b as usize, r as usize));
                }
            }
            self.rows_by_key[side][id as usize].push((batch_index, row as u32));
        }
        if !unpadded.is_empty() {
            out.push(self.padded(other, unpadded, RowKind::Delete)?);
        }
        if !mine.is_empty() {
            out.push(self.joined(side, mine, theirs)?);
        }
        if !padded.is_empty() {
            out.push(self.padded(side, padded, RowKind::Insert)?);
        }
        Ok(())
    }

    /// Whether stored rows carry matched flags: an outer interval join's.
    fn tracks_matches(&self) -> bool {
        tracks_matches(self.condition, self.outer)
    }
}

/// Whether a join with `condition` and `outer` sides keeps matched flags per stored row
/// (an outer interval join; its state is then written whole at each snapshot).
fn tracks_matches(condition: Option<IntervalCondition>, outer: [bool; 2]) -> bool {
    condition.is_some() && (outer[0] || outer[1])
}

impl Operator for StreamJoin {
    fn on_batch(
        &mut self,
        input: usize,
        batch: RecordBatch,
        out: &mut Vec<RecordBatch>,
    ) -> Result<()> {
        if batch.num_rows() > 0 {
            self.add(input.min(1), batch, out)?;
        }
        Ok(())
    }

    fn on_watermark(&mut self, watermark: EventTime, out: &mut Vec<RecordBatch>) -> Result<()> {
        self.compact(watermark, out)
    }

    /// An outer interval join holds the watermark before the oldest stored batch of an
    /// outer side that has a row that never joined: that row may still leave padded,
    /// at its own event time.
    fn output_watermark(&self, input: EventTime) -> EventTime {
        if self.condition.is_none() {
            return input;
        }
        (0..2)
            .filter(|&side| self.outer[side])
            .filter_map(|side| self.matched[side].oldest_unmatched())
            .map(|oldest| oldest.saturating_sub(1))
            .fold(input, EventTime::min)
    }

    fn snapshot(&mut self, _: Epoch) -> Result<OperatorState> {
        self.snapshot_state()
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        self.restore_state(state)
    }
}
