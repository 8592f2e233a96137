//! Joins: window joins (both sides carry the same window column), interval and unbounded
//! equi-joins, and a stream joined with its own per-window maximum, recognized whole
//! (Nexmark q5/q7 → `WindowMaxRows`). The interval shapes live in `interval.rs`.

use super::plan_shape::right_unique_on_keys;
use super::{col_expr, Stream, Translator, WindowColumn, WindowOrigin, WindowPart};
use crate::error::{Result, SqlError};
use datafusion::common::{DFSchema, JoinType};
use datafusion::logical_expr::expr::AggregateFunction as DfAggregate;
use datafusion::logical_expr::{Expr, Join};
use riffle_operators::{
    IntervalCondition, JoinKind, ProjectFactory, StreamJoinFactory, WindowJoinFactory,
};
use std::sync::Arc;

/// A join side with the columns it is joined on, and their names.
pub(super) type KeyedSide = (Stream, Vec<String>);

impl Translator<'_> {
    pub(super) fn join(&mut self, j: &Join) -> Result<Stream> {
        // DataFusion makes an inner join a semi join when the right side is unique on
        // the join columns and only left columns are read; with a condition on the
        // right's columns (Nexmark q5: `num >= maxn`) it is run as the inner join it
        // was, then the left columns kept.
        let semi_as_inner =
            j.join_type == JoinType::LeftSemi && j.filter.is_some() && right_unique_on_keys(j);
        // Outer joins are inner joins that also emit (and later withdraw) padded rows.
        let (kind, outer) = match j.join_type {
            JoinType::Inner => (JoinKind::Inner, (false, false)),
            JoinType::Left => (JoinKind::Inner, (true, false)),
            JoinType::Right => (JoinKind::Inner, (false, true)),
            JoinType::Full => (JoinKind::Inner, (true, true)),
            JoinType::LeftSemi if semi_as_inner => (JoinKind::Inner, (false, false)),
            JoinType::LeftSemi => (JoinKind::LeftSemi, (false, false)),
            // NOT IN's three-valued logic: a NULL on the right empties the window's result.
            JoinType::LeftAnti if j.null_aware => (JoinKind::LeftAntiNullAware, (false, false)),
            JoinType::LeftAnti => (JoinKind::LeftAnti, (false, false)),
            // An inner join reading only the right side of inputs unique on the keys
            // (two aggregates): runs as a join of changelogs, if they update.
            JoinType::RightSemi => {
                let left = self.translate_as_changelog(&j.left)?;
                let right = self.translate_as_changelog(&j.right)?;
                if left.updating.is_some() || right.updating.is_some() {
                    return self.changelog_join(j, &left, &right);
                }
                return Err(SqlError::unsupported(
                    "RightSemi JOIN",
                    "riffle joins streams with INNER, LEFT, RIGHT and FULL JOIN, and EXISTS / IN / NOT EXISTS / NOT IN inside a window",
                ));
            }
            other => {
                return Err(SqlError::unsupported(
                    format!("{other} JOIN"),
                    "riffle joins streams with INNER, LEFT, RIGHT and FULL JOIN, and EXISTS / IN / NOT EXISTS / NOT IN inside a window",
                ))
            }
        };
        let is_outer = outer.0 || outer.1;
        // Both sides as changelogs where they update (an append-only side is as it was).
        let left = self.translate_as_changelog(&j.left)?;
        if left.updating.is_none() {
            if let Some(s) = self.max_rows(j, &left)? {
                return Ok(s);
            }
            if let Some(s) = self.max_rows_by_time(j, &left)? {
                return Ok(s);
            }
        }
        let right = self.translate_as_changelog(&j.right)?;
        if left.updating.is_some() || right.updating.is_some() {
            return self.changelog_join(j, &left, &right);
        }
        // The bounds an interval join checks per pair itself: an outer join's condition
        // must be just those; an inner join's may be, else it filters after the join.
        let interval = match (&j.filter, is_outer) {
            (Some(f), true) => Some(outer_interval_condition(f, j, &left, &right)?),
            (Some(f), false) if kind == JoinKind::Inner && !semi_as_inner => {
                super::interval::interval_condition(f, j, &left, &right)
            }
            _ => None,
        };
        // Rows of a HOP or CUMULATE table function are joined once per window.
        let left = self.expand_windows(&left, None)?;
        let right = self.expand_windows(&right, None)?;
        let (ls, rs) = (j.left.schema(), j.right.schema());
        let mut window: Option<WindowColumn> = None;
        // Where the windows paired in `ON` come from: only their columns stay windows.
        let mut joined_windows: Vec<WindowOrigin> = Vec::new();
        let mut keys: Vec<(usize, usize)> = Vec::new();
        // Keys that are expressions (`b.auction % 10000 = s.key`), computed before the join.
        let mut computed: Vec<(&Expr, &Expr)> = Vec::new();
        for (l, r) in &j.on {
            let (Ok(li), Ok(ri)) = (column_index(l, ls), column_index(r, rs)) else {
                computed.push((l, r));
                continue;
            };
            match (left.windows[li], right.windows[ri]) {
                (Some(a), Some(b)) => {
                    if a.part != b.part {
                        return Err(SqlError::plan(format!(
                            "`{l} = {r}` compares different parts of two windows (e.g. a start with an end)"
                        )));
                    }
                    if a.spec != b.spec {
                        return Err(SqlError::plan(format!(
                            "`{l} = {r}` joins windows of different shapes ({} and {})",
                            a.spec.describe(),
                            b.spec.describe()
                        )));
                    }
                    window = Some(a);
                    joined_windows.extend([a.origin, b.origin]);
                    // `a.window_start = b.window_start` of two window columns: a key too,
                    // so a join on the window alone (Nexmark q5) has one.
                    if a.part != WindowPart::Whole && !left.is_virtual(li) && !right.is_virtual(ri)
                    {
                        keys.push((li, ri));
                    }
                }
                (None, None) => keys.push((li, ri)),
                _ => {
                    return Err(SqlError::plan(format!(
                        "`{l} = {r}` compares a window with a value that is not a window"
                    )))
                }
            }
        }
        if keys.is_empty() && computed.is_empty() {
            return Err(SqlError::unsupported(
                "a join without an equality between columns of the two sides",
                "join ON a.key = b.key (and a.w = b.w for a window join); riffle has no cross or theta joins on streams",
            ));
        }
        if window.is_none() && kind != JoinKind::Inner {
            return Err(SqlError::unsupported(
                "EXISTS / IN / NOT EXISTS / NOT IN over an unbounded stream",
                "bound it by a window: tag both sides with tumble(…) AS w and add a.w = b.w",
            ));
        }
        let inner = kind == JoinKind::Inner;
        // Per-row windows of the join's own window stay virtual (joined rows carry an
        // event time inside it); other virtual fields become columns first.
        let keep = window.map(|w| w.spec);
        let left = self.materialize_unless(&left, keep)?;
        let left = self.prune(&left)?;
        let right = self.materialize_unless(&right, keep)?;
        let right = self.prune(&right)?;
        let left_cols = left.physical_columns();
        // Right columns that clash with the left's (or the window bounds) are renamed.
        let mut reserved = left_cols.clone();
        reserved.extend(["window_start".to_string(), "window_end".to_string()]);
        let right = if inner {
            self.rename_clashes(&right, &reserved)?
        } else {
            right
        };
        let right_cols = if inner {
            right.physical_columns()
        } else {
            Vec::new()
        };
        let ((left, lk), (right, rk)) = self.join_keys(j, (&left, &right), &keys, &computed)?;
        let (lk, rk): (Vec<&str>, Vec<&str>) = (
            lk.iter().map(String::as_str).collect(),
            rk.iter().map(String::as_str).collect(),
        );
        fn refs(v: &[String]) -> Vec<&str> {
            v.iter().map(String::as_str).collect()
        }
        let (lschema, rschema) = (
            self.graph.schema(left.node).clone(),
            self.graph.schema(right.node).clone(),
        );
        let p = Some(self.parallelism());
        let node = match (window, interval) {
            (Some(_), Some(_)) if is_outer => {
                return Err(SqlError::unsupported(
                    format!("{} JOIN of windows with a time condition", j.join_type),
                    "join the windows ON the keys and the window alone, or drop the window for an outer interval join",
                ))
            }
            (Some(w), _) if !w.offset().is_zero() => {
                return Err(SqlError::unsupported(
                    "a window join of windows with an offset",
                    "join windows without an offset, or aggregate each side in its offset windows and join the results ON window_start, window_end and the keys as an unbounded join",
                ))
            }
            (Some(w), _) => {
                let granule = w.granule().ok_or_else(|| {
                    SqlError::unsupported(
                        "joining session windows",
                        "sessions of the two sides do not line up; join on tumble or hop windows",
                    )
                })?;
                let f = WindowJoinFactory::new(
                    kind,
                    &lschema,
                    &rschema,
                    &lk,
                    &rk,
                    granule,
                    &refs(&left_cols),
                    &refs(&right_cols),
                )?
                .with_outer(outer.0, outer.1)?;
                // NOT IN decides on a whole window (a right NULL anywhere empties it), not
                // per key: one subtask sees every key.
                let p = match kind {
                    JoinKind::LeftAntiNullAware => Some(1),
                    _ => p,
                };
                self.add("window_join", Arc::new(f), p, &[left.node, right.node])?
            }
            (None, interval) => {
                let f = StreamJoinFactory::new(
                    &lschema,
                    &rschema,
                    &lk,
                    &rk,
                    &refs(&left_cols),
                    &refs(&right_cols),
                )?;
                let (f, kind) = match (interval, &j.filter) {
                    (Some(condition), _) if is_outer => (
                        f.with_outer_interval(outer.0, outer.1, condition)?,
                        "interval_join",
                    ),
                    (Some(condition), _) => (f.with_interval(condition), "interval_join"),
                    // An outer join here has no condition (see `interval`), so no
                    // retention either.
                    (None, filter) => {
                        let (keep_left, keep_right) = match filter {
                            Some(f) => super::interval::interval_bounds(f, j, &left, &right),
                            None => (None, None),
                        };
                        let f = f
                            .with_retention(keep_left, keep_right)
                            .with_outer(outer.0, outer.1)?;
                        let bounded = keep_left.or(keep_right).is_some();
                        (f, if bounded { "interval_join" } else { "join" })
                    }
                };
                self.add(kind, Arc::new(f), p, &[left.node, right.node])?
            }
        };
        let mut columns = left.columns.clone();
        let mut windows = left.windows.clone();
        if inner {
            columns.extend(right.columns.iter().cloned());
            windows.extend(right.windows.iter().copied());
        }
        // Joined rows carry a new event time (the joined window's end): only the columns
        // of the windows paired in `ON` stay windows; another window a side carries is a
        // plain value now.
        let windows = windows
            .into_iter()
            .map(|w| match (w, window) {
                (Some(c), Some(j)) if c.spec == j.spec && joined_windows.contains(&c.origin) => {
                    Some(WindowColumn {
                        origin: WindowOrigin::Operator(node),
                        ..c
                    })
                }
                _ => None,
            })
            .collect();
        let mut stream = Stream::of_node(node, columns);
        stream.windows = windows;
        if is_outer && window.is_none() && interval.is_none() {
            // A changelog without a key: padded rows are withdrawn by their whole value.
            // (A window's padded rows are final: they leave when it closes.)
            stream.make_keyless_changelog();
        }
        // The interval join checks the time condition itself (a filter after an outer
        // one would drop its padded rows).
        let checked_by_join = window.is_none() && interval.is_some();
        match &j.filter {
            Some(_) if checked_by_join => Ok(stream),
            Some(f) if semi_as_inner => {
                let joined = ls.join(rs)?;
                let mut out = self.filter(&stream, f, &joined)?;
                out.keep_fields(0..ls.fields().len());
                Ok(out)
            }
            Some(f) if inner => self.filter(&stream, f, &j.schema),
            Some(f) => Err(SqlError::unsupported(
                format!("the condition `{f}` of a semi or anti join"),
                "keep only column equalities inside EXISTS / IN / NOT EXISTS / NOT IN",
            )),
            None => Ok(stream),
        }
    }

    /// Both sides of `j` with the columns they are joined on, and those columns' names:
    /// the column pairs `keys` (field indices), then the expressions `computed` (added
    /// by projections).
    pub(super) fn join_keys(
        &mut self,
        j: &Join,
        (left, right): (&Stream, &Stream),
        keys: &[(usize, usize)],
        computed: &[(&Expr, &Expr)],
    ) -> Result<(KeyedSide, KeyedSide)> {
        let (ls, rs) = (j.left.schema(), j.right.schema());
        let mut lk: Vec<String> = keys.iter().map(|(l, _)| left.columns[*l].clone()).collect();
        let mut rk: Vec<String> = keys
            .iter()
            .map(|(_, r)| right.columns[*r].clone())
            .collect();
        let (left, extra) = self.key_columns(left, ls, computed.iter().map(|(l, _)| *l))?;
        lk.extend(extra);
        let (right, extra) = self.key_columns(right, rs, computed.iter().map(|(_, r)| *r))?;
        rk.extend(extra);
        Ok(((left, lk), (right, rk)))
    }

    /// `stream` with `keys` (expressions over `schema`) added as columns the join keys
    /// on, and their names. The fields stay as they were: the join emits only the
    /// fields' columns.
    pub(super) fn key_columns<'e>(
        &mut self,
        stream: &Stream,
        schema: &DFSchema,
        keys: impl Iterator<Item = &'e Expr>,
    ) -> Result<(Stream, Vec<String>)> {
        let mut taken = stream.physical_columns();
        let mut exprs: Vec<Expr> = taken.iter().map(|c| col_expr(c)).collect();
        let mut names = Vec::new();
        for key in keys {
            let name = super::fresh_name("join_key", &taken);
            exprs.push(self.rewrite(key, stream, schema)?.alias(&name));
            taken.push(name.clone());
            names.push(name);
        }
        if names.is_empty() {
            return Ok((stream.clone(), names));
        }
        let f = ProjectFactory::new(self.graph.schema(stream.node), exprs)?;
        let mut out = stream.clone();
        out.node = self.add("project", Arc::new(f), None, &[stream.node])?;
        Ok((out, names))
    }

    /// Renames `stream`'s columns that are in `taken` with a projection.
    pub(super) fn rename_clashes(&mut self, stream: &Stream, taken: &[String]) -> Result<Stream> {
        let cols = stream.physical_columns();
        if !cols.iter().any(|c| taken.contains(c)) {
            return Ok(stream.clone());
        }
        let mut used: Vec<String> = taken.to_vec();
        let mut renamed = Vec::new();
        for c in &cols {
            let name = super::fresh_name(c, &used);
            used.push(name.clone());
            renamed.push((c.clone(), name));
        }
        let exprs = renamed.iter().map(|(c, n)| col_expr(c).alias(n)).collect();
        let f = ProjectFactory::new(self.graph.schema(stream.node), exprs)?;
        let node = self.add("project", Arc::new(f), None, &[stream.node])?;
        let mut out = stream.clone();
        out.node = node;
        out.columns = stream
            .columns
            .iter()
            .map(|c| {
                renamed
                    .iter()
                    .find(|(from, _)| from == c)
                    .map(|(_, to)| to.clone())
                    .unwrap_or_else(|| c.clone())
            })
            .collect();
        Ok(out)
    }
}

/// The time condition of an outer join `j` whose ON has `filter` besides its equalities;
/// an error unless it bounds the sides' event times from both sides and nothing else.
fn outer_interval_condition(
    filter: &Expr,
    j: &Join,
    left: &Stream,
    right: &Stream,
) -> Result<IntervalCondition> {
    if let Some(c) = super::interval::interval_condition(filter, j, left, right) {
        return Ok(c);
    }
    let (keep_left, keep_right) = super::interval::interval_bounds(filter, j, left, right);
    if keep_left.is_some() || keep_right.is_some() {
        return Err(SqlError::unsupported(
            format!(
                "{} JOIN whose ON holds more than equalities and event-time bounds, or bounds only one side",
                j.join_type
            ),
            "bound both sides' event times and nothing else: ON a.k = b.k AND b.t BETWEEN a.t - INTERVAL '1' SECOND AND a.t + INTERVAL '1' SECOND; filter a side before joining",
        ));
    }
    Err(SqlError::unsupported(
        format!("{} JOIN with a condition besides column equalities", j.join_type),
        "join ON equalities only (plus both sides' event-time bounds for an outer interval join); filter a side before joining (a WHERE after an outer join also drops its padded rows)",
    ))
}

pub(super) fn refuse_updating(s: &Stream) -> Result<()> {
    if s.updating.is_some() {
        return Err(SqlError::unsupported(
            "joining an updating result (a GROUP BY without a window)",
            "aggregate over a tumble/hop/session window before joining",
        ));
    }
    Ok(())
}

pub(super) fn column_index(e: &Expr, schema: &DFSchema) -> Result<usize> {
    match e {
        Expr::Column(c) => Ok(schema.index_of_column(c)?),
        other => Err(SqlError::plan(format!(
            "join condition `{other}` must compare columns; compute it in a subquery first"
        ))),
    }
}

/// The column of `max(column)`.
pub(super) fn max_argument(e: &Expr) -> Option<&datafusion::common::Column> {
    let e = crate::windows::unaliased(e);
    let Expr::AggregateFunction(DfAggregate { func, params }) = e else {
        return None;
    };
    match params.args.as_slice() {
        [Expr::Column(c)] if func.name() == "max" && params.filter.is_none() => Some(c),
        _ => None,
    }
}
