//! What the translator knows about a translated plan node.

use riffle_operators::WindowSpec;
use riffle_runtime::NodeId;
use std::time::Duration;

/// Where a window column's rows come from, which decides how windows line up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowOrigin {
    /// Computed per row from its event time (`tumble(…)` in a SELECT list).
    PerRow,
    /// Emitted by this windowed operator: its rows carry event time `end - 1`.
    Operator(NodeId),
}

/// Which part of its window a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowPart {
    /// The struct `{start, end}` (`tumble(…) AS w`).
    Whole,
    /// `window_start` (`w['start']`).
    Start,
    /// `window_end` (`w['end']`).
    End,
    /// `window_time`: the end less 1 ms.
    Time,
}

/// A field holding a window `{start, end}` or a part of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowColumn {
    /// The window's shape.
    pub spec: WindowSpec,
    /// Where it was assigned.
    pub origin: WindowOrigin,
    /// Which part of the window the field holds.
    pub part: WindowPart,
}

impl WindowColumn {
    /// The tumbling window of the rows' event time that separates consecutive windows of
    /// this column: the size of a tumble, the slide of a hop, the step of a cumulate
    /// (rows of a window aggregate carry `end - 1`, and these windows end at multiples of
    /// it). Sessions have none.
    pub fn granule(&self) -> Option<Duration> {
        match self.spec {
            WindowSpec::Tumbling { size, .. } => Some(size),
            WindowSpec::Hopping { slide, .. } => Some(slide),
            WindowSpec::Cumulating { step, .. } => Some(step),
            WindowSpec::Session { .. } => None,
        }
    }

    /// How far after the multiples of its granule this column's windows start (a
    /// tumble's offset; zero for the others).
    pub fn offset(&self) -> Duration {
        match self.spec {
            WindowSpec::Tumbling { offset, .. } => offset,
            _ => Duration::ZERO,
        }
    }
}

/// A translated plan node.
#[derive(Debug, Clone)]
pub struct Stream {
    /// The riffle node producing the rows.
    pub node: NodeId,
    /// For each field of the DataFusion schema, the riffle column holding it.
    pub columns: Vec<String>,
    /// For each field, whether it is a window and which.
    pub windows: Vec<Option<WindowColumn>>,
    /// The field whose values equal the rows' event time, if one does.
    pub event_time: Option<usize>,
    /// `Some(key fields)` when rows are updates of earlier rows with the same keys.
    pub updating: Option<Vec<usize>>,
    /// Batches carry a `_row_kind` column: an updating stream whose changed rows are
    /// withdrawn (`-U`) before their new values, so filters may drop either.
    pub changelog: bool,
    /// The node that decided which rows exist (projections keep it).
    pub origin: NodeId,
    /// For each field that passes a column of `origin` through unchanged, that column.
    pub origin_columns: Vec<Option<String>>,
}

/// Prefix of a field that no batch holds: a per-row `tumble(…)` window, computed from
/// the event time wherever it is read (most such fields are only matched on by a window
/// join or a window maximum, and never need a column).
pub const VIRTUAL_PREFIX: &str = "\u{0}window:";

impl Stream {
    /// Whether field `i` is computed on read rather than held in a column.
    pub fn is_virtual(&self, i: usize) -> bool {
        self.columns[i].starts_with(VIRTUAL_PREFIX)
    }

    /// The columns batches hold, without repeats.
    pub fn physical_columns(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (i, c) in self.columns.iter().enumerate() {
            if !self.is_virtual(i) && !out.contains(c) {
                out.push(c.clone());
            }
        }
        out
    }

    /// The rows of `node`, fields named `columns`.
    pub fn of_node(node: NodeId, columns: Vec<String>) -> Self {
        let n = columns.len();
        Self {
            node,
            origin_columns: columns.iter().cloned().map(Some).collect(),
            columns,
            windows: vec![None; n],
            event_time: None,
            updating: None,
            changelog: false,
            origin: node,
        }
    }

    /// Marks the rows a changelog without a key of its own (an outer join's, a union's,
    /// change events'): a row is withdrawn by its whole value, and a table applies it by
    /// the key it declares.
    pub fn make_keyless_changelog(&mut self) {
        self.changelog = true;
        self.updating = Some(Vec::new());
    }

    /// Keeps only the fields `keep` (a semi join run as an inner join: its own side's
    /// fields of the joined ones).
    pub fn keep_fields(&mut self, keep: std::ops::Range<usize>) {
        fn keep_of<T>(fields: &mut Vec<T>, keep: &std::ops::Range<usize>) {
            fields.truncate(keep.end);
            fields.drain(..keep.start);
        }
        keep_of(&mut self.columns, &keep);
        keep_of(&mut self.windows, &keep);
        keep_of(&mut self.origin_columns, &keep);
    }

    /// The same fields after a row filter at `node`.
    pub fn filtered(&self, node: NodeId) -> Self {
        Self {
            node,
            origin: node,
            origin_columns: self.columns.iter().cloned().map(Some).collect(),
            ..self.clone()
        }
    }
}
