//! Joins: window joins (both sides carry the same window column), unbounded equi-joins,
//! and two shapes recognized whole because riffle has an operator for each:
//! a stream joined with its own per-window maximum (Nexmark q5/q7 → `WindowMaxRows`)
//! and the per-row maximum over a time interval (q4 → `IntervalMaxJoin`).

use super::aggregate::peel;
use super::{col_expr, Stream, Translator, WindowColumn, WindowOrigin};
use crate::error::{Result, SqlError};
use crate::windows::{interval_nanos, window_call};
use datafusion::common::{DFSchema, JoinType};
use datafusion::logical_expr::expr::AggregateFunction as DfAggregate;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{cast, Aggregate, BinaryExpr, Expr, Join, LogicalPlan, Operator};
use riffle_operators::{
    IntervalMaxJoinFactory, JoinKind, ProjectFactory, StreamJoinFactory, WindowJoinFactory,
    WindowMaxRowsFactory,
};
use std::sync::Arc;
use std::time::Duration;

impl Translator<'_> {
    pub(super) fn join(&mut self, j: &Join) -> Result<Stream> {
        let kind = match j.join_type {
            JoinType::Inner => JoinKind::Inner,
            JoinType::LeftSemi => JoinKind::LeftSemi,
            other => {
                return Err(SqlError::unsupported(
                    format!("{other} JOIN"),
                    "riffle joins streams with INNER JOIN, and EXISTS / IN (semi joins) inside a window; outer joins would need retractions",
                ))
            }
        };
        let left = self.translate(&j.left)?;
        refuse_updating(&left)?;
        if let Some(s) = self.max_rows(j, &left)? {
            return Ok(s);
        }
        let right = self.translate(&j.right)?;
        refuse_updating(&right)?;
        let (ls, rs) = (j.left.schema(), j.right.schema());
        let mut window: Option<WindowColumn> = None;
        let mut keys: Vec<(usize, usize)> = Vec::new();
        for (l, r) in &j.on {
            let (li, ri) = (column_index(l, ls)?, column_index(r, rs)?);
            match (left.windows[li], right.windows[ri]) {
                (Some(a), Some(b)) => {
                    if a.spec != b.spec {
                        return Err(SqlError::plan(format!(
                            "`{l} = {r}` joins windows of different shapes ({} and {})",
                            a.spec.describe(),
                            b.spec.describe()
                        )));
                    }
                    window = Some(a);
                }
                (None, None) => keys.push((li, ri)),
                _ => {
                    return Err(SqlError::plan(format!(
                        "`{l} = {r}` compares a window with a value that is not a window"
                    )))
                }
            }
        }
        if keys.is_empty() {
            return Err(SqlError::unsupported(
                "a join without an equality between columns of the two sides",
                "join ON a.key = b.key (and a.w = b.w for a window join); riffle has no cross or theta joins on streams",
            ));
        }
        if window.is_none() && kind == JoinKind::LeftSemi {
            return Err(SqlError::unsupported(
                "EXISTS / IN over an unbounded stream",
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
        let lk: Vec<&str> = keys
            .iter()
            .map(|(l, _)| left.columns[*l].as_str())
            .collect();
        let rk: Vec<&str> = keys
            .iter()
            .map(|(_, r)| right.columns[*r].as_str())
            .collect();
        fn refs(v: &[String]) -> Vec<&str> {
            v.iter().map(String::as_str).collect()
        }
        let (lschema, rschema) = (
            self.graph.schema(left.node).clone(),
            self.graph.schema(right.node).clone(),
        );
        let p = Some(self.parallelism());
        let node = match window {
            Some(w) => {
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
                )?;
                self.add("window_join", Arc::new(f), p, &[left.node, right.node])?
            }
            None => {
                let (keep_left, keep_right) = match &j.filter {
                    Some(f) => interval_bounds(f, j, &left, &right),
                    None => (None, None),
                };
                let f = StreamJoinFactory::new(
                    &lschema,
                    &rschema,
                    &lk,
                    &rk,
                    &refs(&left_cols),
                    &refs(&right_cols),
                )?
                .with_retention(keep_left, keep_right);
                let kind = if keep_left.or(keep_right).is_some() {
                    "interval_join"
                } else {
                    "join"
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
        // Joined rows carry a new event time: windows stay aligned only in a window join.
        let windows = windows
            .into_iter()
            .map(|w| match (w, window) {
                (Some(c), Some(_)) => Some(WindowColumn {
                    spec: c.spec,
                    origin: WindowOrigin::Operator(node),
                }),
                _ => None,
            })
            .collect();
        let mut stream = Stream::of_node(node, columns);
        stream.windows = windows;
        match &j.filter {
            Some(f) if inner => self.filter(&stream, f, &j.schema),
            Some(f) => Err(SqlError::unsupported(
                format!("the condition `{f}` of a semi join"),
                "keep only column equalities inside EXISTS / IN",
            )),
            None => Ok(stream),
        }
    }

    /// Renames `stream`'s columns that are in `taken` with a projection.
    fn rename_clashes(&mut self, stream: &Stream, taken: &[String]) -> Result<Stream> {
        let cols = stream.physical_columns();
        if !cols.iter().any(|c| taken.contains(c)) {
            return Ok(stream.clone());
        }
        let mut used: Vec<String> = taken.to_vec();
        let mut renamed = Vec::new();
        for c in &cols {
            let mut name = c.clone();
            let mut k = 2;
            while used.contains(&name) {
                name = format!("{c}_{k}");
                k += 1;
            }
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

    /// `s JOIN (SELECT w, max(v) FROM s GROUP BY w) m ON s.w = m.w AND s.v = m.max`: the
    /// rows of `s` holding their window's maximum, computed by local and global
    /// `WindowMaxRows` stages without materializing the aggregate.
    fn max_rows(&mut self, j: &Join, left: &Stream) -> Result<Option<Stream>> {
        // DataFusion turns the inner join into a semi join when only the left columns
        // are read (the right side is unique per window).
        let semi = match j.join_type {
            JoinType::Inner => false,
            JoinType::LeftSemi => true,
            _ => return Ok(None),
        };
        if j.filter.is_some() || j.on.len() != 2 {
            return Ok(None);
        }
        let Some((agg, map)) = aggregate_below(&j.right) else {
            return Ok(None);
        };
        if agg.group_expr.len() != 1 || agg.aggr_expr.len() != 1 {
            return Ok(None);
        }
        let Some(value) = max_argument(&agg.aggr_expr[0]) else {
            return Ok(None);
        };
        let (ls, rs) = (j.left.schema(), j.right.schema());
        let (mut window_at, mut value_at) = (None, None);
        for (l, r) in &j.on {
            let (Ok(li), Ok(ri)) = (column_index(l, ls), column_index(r, rs)) else {
                return Ok(None);
            };
            match map.get(ri) {
                Some(0) => window_at = Some(li),
                Some(1) => value_at = Some(li),
                _ => return Ok(None),
            }
        }
        let (Some(w), Some(v)) = (window_at, value_at) else {
            return Ok(None);
        };
        let Some(left_window) = left.windows[w] else {
            return Ok(None);
        };
        let input = self.translate(&agg.input)?;
        let in_schema = agg.input.schema();
        let group_window = match window_call(&agg.group_expr[0])? {
            Some(spec) => Some(WindowColumn {
                spec,
                origin: WindowOrigin::PerRow,
            }),
            None => match &agg.group_expr[0] {
                Expr::Column(c) => input.windows[in_schema.index_of_column(c)?],
                _ => None,
            },
        };
        let value_origin = input.origin_columns[in_schema.index_of_column(value)?].clone();
        let same_rows = input.origin == left.origin
            && value_origin.is_some()
            && value_origin == left.origin_columns[v]
            && group_window == Some(left_window);
        let Some(granule) = left_window.granule().filter(|_| same_rows) else {
            return Ok(None);
        };
        let value_column = left.columns[v].clone();
        let schema = self.graph.schema(left.node).clone();
        let local = WindowMaxRowsFactory::new(&schema, &value_column, granule, false)?;
        let p = Some(self.parallelism());
        let local = self.add("max_rows_local", Arc::new(local), p, &[left.node])?;
        let global = WindowMaxRowsFactory::new(&schema, &value_column, granule, true)?;
        let global = self.add("max_rows_global", Arc::new(global), Some(1), &[local])?;
        // The aggregate's two fields are the row's own window and value.
        let mut columns = left.columns.clone();
        let mut windows = left.windows.clone();
        if !semi {
            columns.extend([left.columns[w].clone(), value_column]);
            windows.extend([left.windows[w], None]);
        }
        let mut stream = Stream::of_node(global, columns);
        stream.windows = windows;
        stream.event_time = left.event_time;
        Ok(Some(stream))
    }
}

/// q4's shape, see [`Translator::interval_max`](super::Translator).
pub(super) fn interval_max(t: &mut Translator<'_>, agg: &Aggregate) -> Result<Option<Stream>> {
    if agg.aggr_expr.len() != 1 {
        return Ok(None);
    }
    let Some(value) = max_argument(&agg.aggr_expr[0]) else {
        return Ok(None);
    };
    let Some((j, map)) = join_below(&agg.input) else {
        return Ok(None);
    };
    let (Some(filter), JoinType::Inner, [(l, r)]) = (&j.filter, j.join_type, j.on.as_slice())
    else {
        return Ok(None);
    };
    let (ls, rs) = (j.left.schema(), j.right.schema());
    let n_left = ls.fields().len();
    let in_schema = agg.input.schema();
    // A field of the aggregate's input as (side, index in that side).
    let side_of = |c: &Expr| -> Option<(bool, usize)> {
        let Expr::Column(c) = c else { return None };
        let k = *map.get(in_schema.index_of_column(c).ok()?)?;
        Some(if k < n_left {
            (true, k)
        } else {
            (false, k - n_left)
        })
    };
    let (Ok(lk), Ok(rk)) = (column_index(l, ls), column_index(r, rs)) else {
        return Ok(None);
    };
    let Some((false, value_at)) = side_of(&Expr::Column(value.clone())) else {
        return Ok(None);
    };
    let mut groups = Vec::new();
    for g in &agg.group_expr {
        match side_of(g) {
            Some((true, k)) => groups.push(k),
            _ => return Ok(None),
        }
    }
    if !groups.contains(&lk) {
        return Ok(None);
    }
    // right.time >= left.a AND right.time <= left.b
    let (mut lower, mut upper, mut time) = (None, None, None);
    for c in split_conjunction(filter) {
        let Some((a, op, b)) = comparison(c) else {
            return Ok(None);
        };
        let (a, op, b) = match (column_index(a, rs), column_index(b, ls)) {
            (Ok(ra), Ok(lb)) => (ra, *op, lb),
            _ => match (column_index(b, rs), column_index(a, ls)) {
                (Ok(ra), Ok(lb)) => (ra, op.swap().unwrap_or(*op), lb),
                _ => return Ok(None),
            },
        };
        if time.is_some_and(|t| t != a) {
            return Ok(None);
        }
        time = Some(a);
        match op {
            Operator::GtEq => lower = Some(b),
            Operator::LtEq => upper = Some(b),
            _ => return Ok(None),
        }
    }
    let (Some(lower), Some(upper), Some(time)) = (lower, upper, time) else {
        return Ok(None);
    };
    let left = t.translate(&j.left)?;
    let left = t.materialize_unless(&left, None)?;
    let left = t.prune(&left)?;
    let right = t.translate(&j.right)?;
    let right = t.materialize_unless(&right, None)?;
    let right = t.prune(&right)?;
    if right.event_time != Some(time) {
        return Err(SqlError::plan(format!(
            "the interval condition compares `{}`, which is not the event time of the right side; compare its event-time column (the WATERMARK column)",
            rs.field(time).name()
        )));
    }
    refuse_updating(&left)?;
    refuse_updating(&right)?;
    let out = agg.schema.field(agg.group_expr.len()).clone();
    let group_cols: Vec<&str> = groups.iter().map(|&k| left.columns[k].as_str()).collect();
    let f = IntervalMaxJoinFactory::new(
        t.graph.schema(left.node),
        t.graph.schema(right.node),
        &left.columns[lk],
        &right.columns[rk],
        (&left.columns[lower], &left.columns[upper]),
        &right.columns[value_at],
        out.name(),
        &group_cols,
    )?;
    let p = Some(t.parallelism());
    let node = t.add(
        "interval_max_join",
        Arc::new(f),
        p,
        &[left.node, right.node],
    )?;
    let mut columns: Vec<String> = group_cols.iter().map(|c| c.to_string()).collect();
    columns.push(out.name().clone());
    let produced = t
        .graph
        .schema(node)
        .schema
        .field_with_name(out.name())?
        .data_type()
        .clone();
    let node = if &produced == out.data_type()
        && super::unique_names(columns.iter().map(String::as_str)) == columns
    {
        node
    } else {
        let names = super::unique_names(agg.schema.fields().iter().map(|f| f.name().as_str()));
        let mut exprs: Vec<Expr> = group_cols
            .iter()
            .zip(&names)
            .map(|(c, n)| col_expr(c).alias(n))
            .collect();
        exprs.push(
            cast(col_expr(out.name()), out.data_type().clone()).alias(&names[names.len() - 1]),
        );
        columns = names;
        let f = ProjectFactory::new(t.graph.schema(node), exprs)?;
        t.add("project", Arc::new(f), None, &[node])?
    };
    Ok(Some(Stream::of_node(node, columns)))
}

/// How long each side's rows must be kept when `filter` bounds the right side's event
/// time by the left's (`r.t BETWEEN l.t - a AND l.t + b` keeps left rows for `b` and
/// right rows for `a` past the watermark). `None` for a side without such a bound.
fn interval_bounds(
    filter: &Expr,
    j: &Join,
    left: &Stream,
    right: &Stream,
) -> (Option<Duration>, Option<Duration>) {
    let n_left = j.left.schema().fields().len();
    // A term `t`, `t + interval` or `t - interval` over an event-time column:
    // (is it the right side's, offset in ns).
    let term = |e: &Expr| -> Option<(bool, i128)> {
        let (column, offset) = match e {
            Expr::BinaryExpr(BinaryExpr {
                left: a,
                op,
                right: b,
            }) => {
                let n = interval_nanos(b)?;
                match op {
                    Operator::Plus => (a.as_ref(), n),
                    Operator::Minus => (a.as_ref(), -n),
                    _ => return None,
                }
            }
            e => (e, 0),
        };
        let column = match column {
            Expr::Cast(c) => c.expr.as_ref(),
            e => e,
        };
        let Expr::Column(c) = column else { return None };
        let i = j.schema.index_of_column(c).ok()?;
        if i < n_left {
            (left.event_time == Some(i)).then_some((false, offset))
        } else {
            (right.event_time == Some(i - n_left)).then_some((true, offset))
        }
    };
    let (mut keep_left, mut keep_right): (Option<i128>, Option<i128>) = (None, None);
    for c in split_conjunction(filter) {
        let Some((a, op, b)) = comparison(c) else {
            continue;
        };
        let (Some((a_right, oa)), Some((b_right, ob))) = (term(a), term(b)) else {
            continue;
        };
        // As `r.t op l.t + d`.
        let (op, d) = match (a_right, b_right) {
            (true, false) => (*op, ob - oa),
            (false, true) => match op.swap() {
                Some(swapped) => (swapped, oa - ob),
                None => continue,
            },
            _ => continue,
        };
        let tighter = |slot: &mut Option<i128>, v: i128| {
            *slot = Some(slot.map_or(v, |s| s.min(v)).max(0));
        };
        match op {
            // r.t >= l.t + d: right rows older than watermark + d are never matched again.
            Operator::GtEq | Operator::Gt => tighter(&mut keep_right, -d),
            // r.t <= l.t + d: left rows older than watermark − d are never matched again.
            Operator::LtEq | Operator::Lt => tighter(&mut keep_left, d),
            _ => {}
        }
    }
    let duration =
        |n: Option<i128>| n.map(|n| Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX)));
    (duration(keep_left), duration(keep_right))
}

/// `a op b` of a binary expression.
fn comparison(e: &Expr) -> Option<(&Expr, &Operator, &Expr)> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => Some((left, op, right)),
        _ => None,
    }
}

fn refuse_updating(s: &Stream) -> Result<()> {
    if s.updating.is_some() {
        return Err(SqlError::unsupported(
            "joining an updating result (a GROUP BY without a window)",
            "aggregate over a tumble/hop/session window before joining",
        ));
    }
    Ok(())
}

fn column_index(e: &Expr, schema: &DFSchema) -> Result<usize> {
    match e {
        Expr::Column(c) => Ok(schema.index_of_column(c)?),
        other => Err(SqlError::plan(format!(
            "join condition `{other}` must compare columns; compute it in a subquery first"
        ))),
    }
}

/// The column of `max(column)`.
fn max_argument(e: &Expr) -> Option<&datafusion::common::Column> {
    let e = crate::windows::unaliased(e);
    let Expr::AggregateFunction(DfAggregate { func, params }) = e else {
        return None;
    };
    match params.args.as_slice() {
        [Expr::Column(c)] if func.name() == "max" && params.filter.is_none() => Some(c),
        _ => None,
    }
}

/// Below aliases and column-only projections: the node, and for each field of `plan`
/// the field of that node it passes through.
fn below(plan: &LogicalPlan) -> (&LogicalPlan, Option<Vec<usize>>) {
    let plan = peel(plan);
    if let LogicalPlan::Projection(p) = plan {
        let (node, inner) = below(&p.input);
        let mut map = Vec::new();
        for e in &p.expr {
            let e = crate::windows::unaliased(e);
            let Expr::Column(c) = e else {
                return (plan, None);
            };
            let Ok(k) = p.input.schema().index_of_column(c) else {
                return (plan, None);
            };
            map.push(match &inner {
                Some(m) => m[k],
                None => k,
            });
        }
        return (node, Some(map));
    }
    (plan, None)
}

fn aggregate_below(plan: &LogicalPlan) -> Option<(&Aggregate, Vec<usize>)> {
    let (node, map) = below(plan);
    match node {
        LogicalPlan::Aggregate(a) => Some((
            a,
            map.unwrap_or_else(|| (0..a.schema.fields().len()).collect()),
        )),
        _ => None,
    }
}

fn join_below(plan: &LogicalPlan) -> Option<(&Join, Vec<usize>)> {
    let (node, map) = below(plan);
    match node {
        LogicalPlan::Join(j) => Some((
            j,
            map.unwrap_or_else(|| (0..j.schema.fields().len()).collect()),
        )),
        _ => None,
    }
}
