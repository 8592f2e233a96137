//! A stream joined with its own per-window maximum (or minimum), recognized whole and run
//! as `WindowMaxRows` (docs/engine.md, "Rows holding a window's maximum"): Nexmark q5's
//! second stage and q7, both as the window-equality rewrite and as Flink's q7 text, a
//! join on the value bounded by the window's time.

use super::interval::{comparison, time_term};
use super::join::column_index;
use super::plan_shape::aggregate_below;
use super::{fresh_name, Stream, Translator, WindowColumn, WindowOrigin, WindowPart};
use crate::error::Result;
use crate::windows::window_call;
use datafusion::common::{JoinType, NullEquality};
use datafusion::logical_expr::expr::AggregateFunction as DfAggregate;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{Aggregate, Expr, Join, LogicalPlan, Operator};
use riffle_core::OperatorFactory;
use riffle_operators::WindowSpec;
use riffle_operators::{Extreme, WindowMaxRowsFactory};
use std::sync::Arc;
use std::time::Duration;

impl Translator<'_> {
    /// `s JOIN (SELECT w, max(v) FROM s GROUP BY w) m ON s.w = m.w AND s.v = m.max`: the
    /// rows of `s` holding their window's maximum (or minimum), computed by local and global
    /// `WindowMaxRows` stages without materializing the aggregate. The window may be one
    /// column or, as Flink users write it over a window TVF, its parts
    /// (`GROUP BY window_start, window_end` and `ON s.window_start = m.window_start`).
    pub(super) fn max_rows(&mut self, j: &Join, left: &Stream) -> Result<Option<Stream>> {
        // DataFusion turns the inner join into a semi join when only the left columns
        // are read (the right side is unique per window).
        let semi = match j.join_type {
            JoinType::Inner => false,
            JoinType::LeftSemi => true,
            _ => return Ok(None),
        };
        if j.filter.is_some() || j.null_equality != NullEquality::NullEqualsNothing {
            return Ok(None);
        }
        let Some((agg, map, value, extreme)) = extreme_below(&j.right) else {
            return Ok(None);
        };
        let n_groups = agg.group_expr.len();
        let (ls, rs) = (j.left.schema(), j.right.schema());
        // The ON pairs: left fields matched with a window group, and the value.
        let (mut windows_on, mut value_at) = (Vec::new(), None);
        for (l, r) in &j.on {
            let (Ok(li), Ok(ri)) = (column_index(l, ls), column_index(r, rs)) else {
                return Ok(None);
            };
            match map.get(ri) {
                Some(&g) if g < n_groups => windows_on.push((li, g)),
                Some(&g) if g == n_groups && value_at.is_none() => value_at = Some(li),
                _ => return Ok(None),
            }
        }
        let Some(v) = value_at.filter(|_| !windows_on.is_empty()) else {
            return Ok(None);
        };
        let input = self.translate(&agg.input)?;
        let in_schema = agg.input.schema();
        // Each group's window (part), as the aggregate's input has it: all parts of one.
        let mut group_windows = Vec::new();
        for g in &agg.group_expr {
            let w = match window_call(g)? {
                Some(spec) => Some(WindowColumn {
                    spec,
                    origin: WindowOrigin::PerRow,
                    part: WindowPart::Whole,
                }),
                None => match g {
                    Expr::Column(c) => input.windows[in_schema.index_of_column(c)?],
                    _ => None,
                },
            };
            let Some(w) = w else { return Ok(None) };
            group_windows.push(w);
        }
        let window = group_windows[0];
        if group_windows
            .iter()
            .any(|w| w.spec != window.spec || w.origin != window.origin)
        {
            return Ok(None);
        }
        // The operator keeps one window per row, `granule` long: a per-row hop or
        // cumulate puts a row in several windows (the join would expand it first); and a
        // cumulate's windows share their start, so the start alone does not name one.
        let one_per_row = window.origin != WindowOrigin::PerRow
            || matches!(window.spec, WindowSpec::Tumbling { .. });
        let named = !matches!(window.spec, WindowSpec::Cumulating { .. })
            || windows_on
                .iter()
                .any(|&(_, g)| group_windows[g].part != WindowPart::Start);
        if !(one_per_row && named) {
            return Ok(None);
        }
        let value_origin = input.origin_columns[in_schema.index_of_column(value)?].clone();
        let same_rows = input.origin == left.origin
            && value_origin.is_some()
            && value_origin == left.origin_columns[v]
            && windows_on
                .iter()
                .all(|&(li, g)| left.windows[li] == Some(group_windows[g]));
        let Some(granule) = window
            .granule()
            .filter(|_| same_rows && window.offset().is_zero())
        else {
            return Ok(None);
        };
        let value_column = left.columns[v].clone();
        let schema = self.graph.schema(left.node).clone();
        if !is_numeric(&schema, &value_column) {
            return Ok(None);
        }
        // The right side's fields are the row's own window (parts) and value: a left
        // column holding that part, in the right side's order.
        let mut right_columns = Vec::new();
        if !semi {
            for i in 0..rs.fields().len() {
                let column = match map.get(i) {
                    Some(&g) if g < n_groups => left
                        .windows
                        .iter()
                        .position(|w| *w == Some(group_windows[g]))
                        .map(|k| (left.columns[k].clone(), left.windows[k])),
                    Some(&g) if g == n_groups => Some((value_column.clone(), None)),
                    _ => None,
                };
                let Some(column) = column else {
                    return Ok(None);
                };
                right_columns.push(column);
            }
        }
        let local =
            WindowMaxRowsFactory::new(&schema, &value_column, granule, false)?.extreme(extreme);
        let p = Some(self.parallelism());
        let local = self.add("max_rows_local", Arc::new(local), p, &[left.node])?;
        let global =
            WindowMaxRowsFactory::new(&schema, &value_column, granule, true)?.extreme(extreme);
        let global = self.add("max_rows_global", Arc::new(global), Some(1), &[local])?;
        let mut columns = left.columns.clone();
        let mut windows = left.windows.clone();
        for (column, window) in right_columns {
            columns.push(column);
            windows.push(window);
        }
        let mut stream = Stream::of_node(global, columns);
        stream.windows = windows;
        stream.event_time = left.event_time;
        Ok(Some(stream))
    }

    /// Flink's q7 text: `s JOIN (SELECT MAX(v) AS m, window_end AS t FROM
    /// TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), size)) GROUP BY window_start, window_end) w
    /// ON s.v = w.m WHERE s.ts BETWEEN w.t - size AND w.t`: every row of `s` whose time
    /// lies in a window and whose value is that window's maximum, without keeping `s`.
    /// The bounds must be exactly the window's `[start, end]` or `[start, end)`.
    pub(super) fn max_rows_by_time(&mut self, j: &Join, left: &Stream) -> Result<Option<Stream>> {
        let (JoinType::Inner, Some(filter), [(l, r)], NullEquality::NullEqualsNothing) =
            (j.join_type, &j.filter, j.on.as_slice(), j.null_equality)
        else {
            return Ok(None);
        };
        // In processing time the time column is the read time cut to milliseconds, which
        // the bounds compare; the operator would compare the exact time.
        if self.processing_time {
            return Ok(None);
        }
        let Some((agg, map, value, extreme)) = extreme_below(&j.right) else {
            return Ok(None);
        };
        let (ls, rs) = (j.left.schema(), j.right.schema());
        let (Ok(value_at), Ok(extreme_at)) = (column_index(l, ls), column_index(r, rs)) else {
            return Ok(None);
        };
        let n_groups = agg.group_expr.len();
        if map.get(extreme_at) != Some(&n_groups) {
            return Ok(None);
        }
        let Some(bounds) = window_bounds(filter, j, &map, n_groups) else {
            return Ok(None);
        };
        if left.event_time != Some(bounds.time) {
            return Ok(None);
        }
        let input = self.translate(&agg.input)?;
        let in_schema = agg.input.schema();
        let value_origin = input.origin_columns[in_schema.index_of_column(value)?].clone();
        if input.origin != left.origin
            || value_origin.is_none()
            || value_origin != left.origin_columns[value_at]
        {
            return Ok(None);
        }
        let Some((size, parts)) = tumble_parts(agg, &input)? else {
            return Ok(None);
        };
        // The filter's bounds, from the window's start.
        let from_start = |(group, offset): (usize, i128)| match parts[group] {
            WindowPart::Start => Some(offset),
            WindowPart::End => Some(offset + size.as_nanos() as i128),
            _ => None,
        };
        let (Some(lower), Some(upper)) = (
            from_start(bounds.lower.0).filter(|_| !bounds.lower.1),
            from_start(bounds.upper.0),
        ) else {
            return Ok(None);
        };
        if lower != 0 || upper != size.as_nanos() as i128 {
            return Ok(None);
        }
        let end_inclusive = !bounds.upper.1;

        let schema = self.graph.schema(left.node).clone();
        let taken: Vec<String> = schema
            .schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        let mut names: Vec<String> = Vec::new();
        for base in ["window_start", "window_end", extreme.name()] {
            let all: Vec<String> = taken.iter().chain(&names).cloned().collect();
            names.push(fresh_name(base, &all));
        }
        let value_column = left.columns[value_at].clone();
        if !is_numeric(&schema, &value_column) {
            return Ok(None);
        }
        let stage = |global| -> Result<WindowMaxRowsFactory> {
            let names = [names[0].as_str(), names[1].as_str(), names[2].as_str()];
            Ok(
                WindowMaxRowsFactory::new(&schema, &value_column, size, global)?
                    .extreme(extreme)
                    .by_time(end_inclusive, names)?,
            )
        };
        let (local, global) = (stage(false)?, stage(true)?);
        // The right side's fields as the global stage's columns, of the same types.
        let out_schema = global.output_schema().schema.clone();
        let mut right_columns = Vec::new();
        for (i, field) in rs.fields().iter().enumerate() {
            let name = match map.get(i) {
                Some(&g) if g == n_groups => &names[2],
                Some(&g) if parts[g] == WindowPart::Start => &names[0],
                Some(&g) if parts[g] == WindowPart::End => &names[1],
                _ => return Ok(None),
            };
            if out_schema.field_with_name(name)?.data_type() != field.data_type() {
                return Ok(None);
            }
            right_columns.push(name.clone());
        }
        let p = Some(self.parallelism());
        let local = self.add("max_rows_local", Arc::new(local), p, &[left.node])?;
        let global = self.add("max_rows_global", Arc::new(global), Some(1), &[local])?;
        let mut columns = left.columns.clone();
        columns.extend(right_columns);
        let mut stream = Stream::of_node(global, columns);
        stream.windows = left.windows.clone();
        stream.windows.resize(stream.columns.len(), None);
        stream.event_time = left.event_time;
        Ok(Some(stream))
    }
}

/// A join filter `l.t >= w.a + x AND l.t <= w.b + y` (either side first, `<`/`>` too):
/// the left's time field, and each bound as (aggregate group, offset in ns) with whether
/// it is strict.
struct WindowBounds {
    time: usize,
    lower: ((usize, i128), bool),
    upper: ((usize, i128), bool),
}

/// The [`WindowBounds`] of `filter`, whose right fields pass through aggregate fields as
/// `map` says; `None` unless it is exactly two such bounds.
fn window_bounds(filter: &Expr, j: &Join, map: &[usize], n_groups: usize) -> Option<WindowBounds> {
    let n_left = j.left.schema().fields().len();
    let (mut time, mut lower, mut upper) = (None, None, None);
    for c in split_conjunction(filter) {
        let (a, op, b) = comparison(c)?;
        let ((ia, oa), (ib, ob)) = (time_term(a, j)?, time_term(b, j)?);
        // As `left op right + offset`.
        let (t, op, w, offset) = match (ia < n_left, ib < n_left) {
            (true, false) => (ia, *op, ib - n_left, ob - oa),
            (false, true) => (ib, op.swap()?, ia - n_left, oa - ob),
            _ => return None,
        };
        let group = *map.get(w).filter(|&&g| g < n_groups)?;
        if time.is_some_and(|seen| seen != t) {
            return None;
        }
        time = Some(t);
        let bound = Some(((group, offset), matches!(op, Operator::Gt | Operator::Lt)));
        match op {
            Operator::GtEq | Operator::Gt if lower.is_none() => lower = bound,
            Operator::LtEq | Operator::Lt if upper.is_none() => upper = bound,
            _ => return None,
        }
    }
    Some(WindowBounds {
        time: time?,
        lower: lower?,
        upper: upper?,
    })
}

/// The size of the one tumble (windows at multiples of it) that all of `agg`'s groups
/// are parts of, computed per row of `input`, and each group's part.
fn tumble_parts(agg: &Aggregate, input: &Stream) -> Result<Option<(Duration, Vec<WindowPart>)>> {
    let in_schema = agg.input.schema();
    let mut size = None;
    let mut parts = Vec::new();
    for g in &agg.group_expr {
        let Expr::Column(c) = g else { return Ok(None) };
        let Some(w) = input.windows[in_schema.index_of_column(c)?] else {
            return Ok(None);
        };
        let WindowSpec::Tumbling { size: s, offset } = w.spec else {
            return Ok(None);
        };
        if w.origin != WindowOrigin::PerRow || !offset.is_zero() || size.is_some_and(|z| z != s) {
            return Ok(None);
        }
        size = Some(s);
        parts.push(w.part);
    }
    Ok(size.map(|s| (s, parts)))
}

/// Whether `column` of `schema` holds numbers, which the max-rows operator compares
/// (any other type runs as the join it is).
fn is_numeric(schema: &riffle_core::StreamSchema, column: &str) -> bool {
    schema
        .schema
        .field_with_name(column)
        .is_ok_and(|f| f.data_type().is_integer() || f.data_type().is_floating())
}

/// The aggregate below `plan` when it computes one `MAX` or `MIN`: with the map of
/// `plan`'s fields to its fields, the aggregated column, and which extreme.
fn extreme_below(
    plan: &LogicalPlan,
) -> Option<(&Aggregate, Vec<usize>, &datafusion::common::Column, Extreme)> {
    let (agg, map) = aggregate_below(plan)?;
    let [aggr] = agg.aggr_expr.as_slice() else {
        return None;
    };
    let (value, extreme) = extreme_argument(aggr)?;
    Some((agg, map, value, extreme))
}

/// The column of `max(column)` or `min(column)`, and which.
fn extreme_argument(e: &Expr) -> Option<(&datafusion::common::Column, Extreme)> {
    let e = crate::windows::unaliased(e);
    let Expr::AggregateFunction(DfAggregate { func, params }) = e else {
        return None;
    };
    let extreme = match func.name() {
        "max" => Extreme::Max,
        "min" => Extreme::Min,
        _ => return None,
    };
    match params.args.as_slice() {
        [Expr::Column(c)] if params.filter.is_none() => Some((c, extreme)),
        _ => None,
    }
}
