//! Window shapes and the helpers every windowed operator shares.

use riffle_core::arrow::array::{ArrayRef, AsArray, TimestampNanosecondArray, UInt16Array};
use riffle_core::arrow::datatypes::{Field, Schema, SchemaRef, TimestampNanosecondType};
use riffle_core::arrow::row::{RowConverter, SortField};
use riffle_core::state::KEY_GROUP_FIELD;
use riffle_core::{
    timestamp_type, EventTime, KeyGroup, KeyHasher, RecordBatch, Result, StreamSchema,
};
use std::sync::Arc;
use std::time::Duration;

/// The shape of event-time windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSpec {
    /// Fixed, non-overlapping windows of `size`, starting `offset` after the multiples of
    /// `size` since the epoch (Flink's window offset; zero by default).
    Tumbling {
        /// Window length.
        size: Duration,
        /// How far after the multiples of `size` windows start (less than `size`).
        offset: Duration,
    },
    /// Windows of `size` starting every `slide` (size a multiple of slide).
    Hopping {
        /// Window length.
        size: Duration,
        /// Distance between window starts.
        slide: Duration,
    },
    /// Windows that grow by `step` from a common start until they are `max` long,
    /// then start again (Flink's CUMULATE): `[s, s+step)`, `[s, s+2·step)`, … `[s, s+max)`
    /// with `s` a multiple of `max` (`max` a multiple of `step`).
    Cumulating {
        /// How much each window adds to the previous one.
        step: Duration,
        /// The longest window; windows restart at multiples of it.
        max: Duration,
    },
    /// Per key, rows closer than `gap` belong to one session.
    Session {
        /// Inactivity gap that ends a session.
        gap: Duration,
    },
}

pub(crate) fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

impl WindowSpec {
    /// Tumbling windows of `size` starting at its multiples since the epoch.
    pub fn tumbling(size: Duration) -> Self {
        WindowSpec::Tumbling {
            size,
            offset: Duration::ZERO,
        }
    }

    /// Short display, e.g. `hop(10s, 2s)`.
    pub fn describe(&self) -> String {
        match self {
            WindowSpec::Tumbling { size, offset } if offset.is_zero() => {
                format!("tumble({size:?})")
            }
            WindowSpec::Tumbling { size, offset } => format!("tumble({size:?}, offset {offset:?})"),
            WindowSpec::Hopping { size, slide } => format!("hop({size:?}, {slide:?})"),
            WindowSpec::Cumulating { step, max } => format!("cumulate({step:?}, {max:?})"),
            WindowSpec::Session { gap } => format!("session({gap:?})"),
        }
    }
}

/// Where the windows of a tumbling, hopping or cumulating spec lie, in nanoseconds.
///
/// Every window ends at a multiple of `pane` (the size of a tumble, the slide of a hop,
/// the step of a cumulate), and each `pane`-long slice of event time is in one run of
/// consecutive windows; so a window is named by its end, windows fire in order of end,
/// and state is kept per pane (docs/engine.md, "Window aggregates").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WindowGeometry {
    /// Length of a pane: the distance between consecutive window ends.
    pub pane: i64,
    /// The (largest) window length: a multiple of `pane`.
    pub size: i64,
    /// Cumulating windows start at multiples of `size`; the others `size` before their end.
    cumulating: bool,
    /// Window ends lie `offset` after the multiples of `pane` (a tumble's offset).
    offset: i64,
}

impl WindowGeometry {
    /// The geometry of `spec`, or `None` for sessions (which have none) and for lengths
    /// that are not positive multiples of the pane.
    pub fn of(spec: WindowSpec) -> Option<Self> {
        let (pane, size, cumulating, offset) = match spec {
            WindowSpec::Tumbling { size, offset } => {
                (nanos(size), nanos(size), false, nanos(offset))
            }
            WindowSpec::Hopping { size, slide } => (nanos(slide), nanos(size), false, 0),
            WindowSpec::Cumulating { step, max } => (nanos(step), nanos(max), true, 0),
            WindowSpec::Session { .. } => return None,
        };
        (pane > 0 && size > 0 && size % pane == 0).then_some(Self {
            pane,
            size,
            cumulating,
            offset: offset.rem_euclid(pane),
        })
    }

    /// Whether each window is exactly one pane (a tumble): no merging needed.
    pub fn one_pane_per_window(&self) -> bool {
        self.pane == self.size
    }

    /// Start of the pane holding event time `ts`.
    pub fn pane_of(&self, ts: EventTime) -> EventTime {
        window_start_after(ts, self.pane, self.offset)
    }

    /// Start of the window ending at `end` (a multiple of the pane).
    pub fn start_of(&self, end: EventTime) -> EventTime {
        if self.cumulating {
            window_start(end - 1, self.size)
        } else {
            end - self.size
        }
    }

    /// End of the first window holding the pane starting at `pane`.
    pub fn first_end(&self, pane: EventTime) -> EventTime {
        pane.saturating_add(self.pane)
    }

    /// End of the last window holding the pane starting at `pane`: once it has fired, the
    /// pane is in no window still to fire.
    pub fn last_end(&self, pane: EventTime) -> EventTime {
        if self.cumulating {
            window_start(pane, self.size).saturating_add(self.size)
        } else {
            pane.saturating_add(self.size)
        }
    }

    /// End of the newest window that `watermark` closes (a window `[s, e)` closes when
    /// the watermark reaches `e − 1`, its last instant).
    pub fn newest_closed_end(&self, watermark: EventTime) -> EventTime {
        window_start_after(watermark.saturating_add(1), self.pane, self.offset)
    }
}

/// How far before its window's end a row's `window_time` is: 1 ms, as in Flink.
pub const WINDOW_TIME_BEFORE_END_NANOS: i64 = 1_000_000;

/// A nanosecond length for display: `10s`, `500ms`.
pub(crate) fn display_nanos(ns: i64) -> String {
    format!("{:?}", Duration::from_nanos(ns.max(0) as u64))
}

/// Start of the tumbling window of `size` containing `ts`.
pub(crate) fn window_start(ts: EventTime, size: i64) -> EventTime {
    window_start_after(ts, size, 0)
}

/// Start of the window of `size` containing `ts`, windows starting `offset` after the
/// multiples of `size`.
pub(crate) fn window_start_after(ts: EventTime, size: i64, offset: i64) -> EventTime {
    ts - ts.saturating_sub(offset).rem_euclid(size)
}

/// The event-time column of a batch.
pub(crate) fn timestamps(batch: &RecordBatch, index: usize) -> &[i64] {
    batch
        .column(index)
        .as_primitive::<TimestampNanosecondType>()
        .values()
}

/// A timestamp column (ns, UTC) of the given values.
pub(crate) fn timestamp_array(values: Vec<i64>) -> ArrayRef {
    Arc::new(TimestampNanosecondArray::from(values).with_timezone("UTC"))
}

/// Window bound fields of windowed outputs.
pub(crate) fn window_fields() -> [Field; 2] {
    [
        Field::new("window_start", timestamp_type(), false),
        Field::new("window_end", timestamp_type(), false),
    ]
}

/// The schema of the columns at `indices` of `input` (a partition's or group's key).
pub(crate) fn key_schema(input: &StreamSchema, indices: &[usize]) -> SchemaRef {
    Arc::new(Schema::new(
        indices
            .iter()
            .map(|&i| input.schema.field(i).clone())
            .collect::<Vec<_>>(),
    ))
}

/// The fields of `input` but `_timestamp`: the start of an output that passes input
/// rows through (the timestamp goes last again).
pub(crate) fn fields_but_timestamp(input: &StreamSchema) -> Vec<Field> {
    input
        .schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != input.timestamp_index)
        .map(|(_, f)| f.as_ref().clone())
        .collect()
}

/// Converts whole input rows (every column, `_timestamp` too) to comparable bytes: rows
/// kept by value, or ordered by all their values.
pub(crate) fn whole_rows(input: &StreamSchema) -> Result<RowConverter> {
    Ok(RowConverter::new(
        input
            .schema
            .fields()
            .iter()
            .map(|f| SortField::new(f.data_type().clone()))
            .collect(),
    )?)
}

/// `input` without its column `at` (a changelog's row kind, which rows kept in state
/// do not hold).
pub(crate) fn without_column(input: &StreamSchema, at: usize) -> Result<StreamSchema> {
    let fields: Vec<Field> = input
        .schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != at)
        .map(|(_, f)| f.as_ref().clone())
        .collect();
    StreamSchema::new(Arc::new(Schema::new(fields)))
}

/// Whole input rows (`columns`, with `_timestamp`) as a state batch: keyed by the key
/// group of their `key` columns, then `extra` columns after them.
pub(crate) fn keyed_rows_state(
    input: &StreamSchema,
    columns: Vec<ArrayRef>,
    key: &[usize],
    extra: Vec<(Field, ArrayRef)>,
    max_parallelism: u16,
) -> Result<RecordBatch> {
    let rows = columns.first().map_or(0, |c| c.len());
    let keys: Vec<ArrayRef> = key.iter().map(|&i| columns[i].clone()).collect();
    let (kg_field, kg) = key_group_column(&keys, rows, max_parallelism)?;
    let mut fields = vec![kg_field];
    fields.extend(input.schema.fields().iter().map(|f| f.as_ref().clone()));
    let mut state = vec![kg];
    state.extend(columns);
    for (field, column) in extra {
        fields.push(field);
        state.push(column);
    }
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), state)?)
}

/// The `_key_group` column of state rows with these key columns.
pub(crate) fn key_group_column(
    keys: &[ArrayRef],
    rows: usize,
    max_parallelism: u16,
) -> Result<(Field, ArrayRef)> {
    // The empty key hashes to 0: key group 0, where the keyed exchange sends its rows.
    let groups: Vec<u16> = KeyHasher::default()
        .hash_rows(keys, rows)?
        .iter()
        .map(|h| KeyGroup::of_hash(*h, max_parallelism).0)
        .collect();
    Ok((
        Field::new(
            KEY_GROUP_FIELD,
            riffle_core::arrow::datatypes::DataType::UInt16,
            false,
        ),
        Arc::new(UInt16Array::from(groups)),
    ))
}

/// Takes `rows` of every column.
pub(crate) fn take_rows(columns: &[ArrayRef], rows: &[u32]) -> Result<Vec<ArrayRef>> {
    let idx = riffle_core::arrow::array::UInt32Array::from(rows.to_vec());
    columns
        .iter()
        .map(|c| Ok(riffle_core::arrow::compute::take(c.as_ref(), &idx, None)?))
        .collect()
}

/// The schema of a state batch holding rows of the window at `start`. The window start
/// is schema metadata, so each window's rows go to files of their own: a fired window
/// then leaves every other window's files reusable by the next checkpoint.
///
/// `row_key` names the columns that identify a row when later snapshots write deltas of
/// it ([`ROW_KEY_METADATA`](riffle_core::state::ROW_KEY_METADATA)).
pub(crate) fn window_state_schema(
    fields: Vec<Field>,
    start: EventTime,
    row_key: Option<String>,
) -> SchemaRef {
    let mut metadata =
        std::collections::HashMap::from([("riffle.window_start".to_string(), start.to_string())]);
    if let Some(key) = row_key {
        metadata.insert(riffle_core::state::ROW_KEY_METADATA.to_string(), key);
    }
    Arc::new(Schema::new_with_metadata(fields, metadata))
}

/// `batch` with schema metadata naming `row_key` as the columns that identify a row
/// ([`ROW_KEY_METADATA`](riffle_core::state::ROW_KEY_METADATA)): a row in a later snapshot
/// batch with the same values replaces it (incremental snapshots).
pub(crate) fn with_row_key(batch: RecordBatch, row_key: &[&str]) -> Result<RecordBatch> {
    let metadata = std::collections::HashMap::from([(
        riffle_core::state::ROW_KEY_METADATA.to_string(),
        row_key.join(","),
    )]);
    let schema = Schema::new_with_metadata(batch.schema().fields().clone(), metadata);
    Ok(batch.with_schema(Arc::new(schema))?)
}

/// The state rows of the groups `ids` of `table`, whose keys `key_schema` names: each
/// row's key group, its keys, then `state`. The keys identify a row, so a later
/// snapshot's row of the same group replaces it (incremental snapshots).
pub(crate) fn group_state_batch(
    table: &crate::aggregate::GroupKeys,
    key_schema: &SchemaRef,
    ids: &[u32],
    max_parallelism: u16,
    state: Vec<(Field, ArrayRef)>,
) -> Result<RecordBatch> {
    keyed_state_batch(table.keys(ids)?, key_schema, max_parallelism, state)
}

/// [`group_state_batch`] of groups given by their key columns (groups held outside a
/// [`GroupKeys`](crate::aggregate::GroupKeys) table: spilled ones).
pub(crate) fn keyed_state_batch(
    keys: Vec<ArrayRef>,
    key_schema: &SchemaRef,
    max_parallelism: u16,
    state: Vec<(Field, ArrayRef)>,
) -> Result<RecordBatch> {
    let rows = keys
        .first()
        .or(state.first().map(|(_, c)| c))
        .map_or(0, |c| c.len());
    let (kg_field, kg) = key_group_column(&keys, rows, max_parallelism)?;
    let mut fields = vec![kg_field];
    let mut columns = vec![kg];
    fields.extend(key_schema.fields().iter().map(|f| f.as_ref().clone()));
    columns.extend(keys);
    for (f, c) in state {
        fields.push(f);
        columns.push(c);
    }
    let row_key: Vec<&str> = key_schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)?;
    with_row_key(batch, &row_key)
}

/// The columns `fields` names, found by name in a state batch of `operator`.
///
/// # Errors
/// A column is missing: the state was written by a different plan.
pub(crate) fn state_columns(
    batch: &RecordBatch,
    fields: &riffle_core::arrow::datatypes::Fields,
    operator: &str,
) -> Result<Vec<ArrayRef>> {
    fields
        .iter()
        .map(|f| {
            batch
                .column_by_name(f.name())
                .cloned()
                .ok_or_else(|| riffle_core::Error::State {
                    operator: operator.into(),
                    message: format!("missing column `{}`", f.name()),
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    const S: i64 = 1_000_000_000;

    #[test]
    fn a_tumbling_window_is_one_pane() {
        let g = WindowGeometry::of(WindowSpec::tumbling(secs(10))).unwrap();
        assert!(g.one_pane_per_window());
        assert_eq!(g.pane_of(13 * S), 10 * S);
        assert_eq!(g.first_end(10 * S), 20 * S);
        assert_eq!(g.last_end(10 * S), 20 * S);
        assert_eq!(g.start_of(20 * S), 10 * S);
    }

    #[test]
    fn a_tumbling_window_with_an_offset_starts_that_long_after_the_multiples() {
        // Flink: TUMBLE(…, INTERVAL '10' SECOND, INTERVAL '2' SECOND) puts 13 s in [12, 22)
        // and 1 s in [-8, 2).
        let g = WindowGeometry::of(WindowSpec::Tumbling {
            size: secs(10),
            offset: secs(2),
        })
        .unwrap();
        assert_eq!(g.pane_of(13 * S), 12 * S);
        assert_eq!(g.pane_of(12 * S), 12 * S);
        assert_eq!(g.pane_of(S), -8 * S);
        assert_eq!(g.first_end(12 * S), 22 * S);
        assert_eq!(g.start_of(22 * S), 12 * S);
        // The window [12, 22) closes once the watermark reaches its last instant.
        assert_eq!(g.newest_closed_end(22 * S - 2), 12 * S);
        assert_eq!(g.newest_closed_end(22 * S - 1), 22 * S);
    }

    #[test]
    fn a_hopping_pane_is_in_size_over_slide_windows() {
        let g = WindowGeometry::of(WindowSpec::Hopping {
            size: secs(10),
            slide: secs(2),
        })
        .unwrap();
        assert_eq!(g.pane_of(13 * S), 12 * S);
        // [4, 14) … [12, 22): five windows, ends 14 … 22.
        assert_eq!(g.first_end(12 * S), 14 * S);
        assert_eq!(g.last_end(12 * S), 22 * S);
        assert_eq!(g.start_of(14 * S), 4 * S);
    }

    #[test]
    fn cumulating_windows_share_their_start_until_the_max() {
        let g = WindowGeometry::of(WindowSpec::Cumulating {
            step: secs(2),
            max: secs(10),
        })
        .unwrap();
        assert!(!g.one_pane_per_window());
        assert_eq!(g.pane_of(13 * S), 12 * S);
        // Windows [10, 12), [10, 14), … [10, 20): the pane at 12 is in [10, 14) … [10, 20).
        assert_eq!(g.first_end(12 * S), 14 * S);
        assert_eq!(g.last_end(12 * S), 20 * S);
        assert_eq!(g.start_of(14 * S), 10 * S);
        assert_eq!(g.start_of(20 * S), 10 * S);
        assert_eq!(g.start_of(22 * S), 20 * S);
        // Before the epoch too.
        assert_eq!(g.start_of(-8 * S), -10 * S);
        assert_eq!(g.last_end(-4 * S), 0);
    }

    #[test]
    fn a_window_closes_when_the_watermark_reaches_its_last_instant() {
        let g = WindowGeometry::of(WindowSpec::Cumulating {
            step: secs(2),
            max: secs(10),
        })
        .unwrap();
        assert_eq!(g.newest_closed_end(14 * S - 1), 14 * S);
        assert_eq!(g.newest_closed_end(14 * S - 2), 12 * S);
    }

    #[test]
    fn sessions_and_uneven_lengths_have_no_geometry() {
        assert!(WindowGeometry::of(WindowSpec::Session { gap: secs(1) }).is_none());
        let uneven = WindowSpec::Cumulating {
            step: secs(3),
            max: secs(10),
        };
        assert!(WindowGeometry::of(uneven).is_none());
    }
}
