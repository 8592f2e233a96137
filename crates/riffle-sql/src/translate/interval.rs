//! The interval shapes of joins: q4's per-row maximum over a time interval
//! (`IntervalMaxJoin`), and the per-side retention that makes a time-bounded equi-join an
//! interval join.

use super::join::{column_index, max_argument, refuse_updating};
use super::plan_shape::join_below;
use super::{col_expr, Stream, Translator};
use crate::error::{Result, SqlError};
use crate::windows::interval_nanos;
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::JoinType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{cast, Aggregate, BinaryExpr, Expr, Join, Operator};
use riffle_operators::{IntervalCondition, IntervalMaxJoinFactory, ProjectFactory, TimeBound};
use std::sync::Arc;
use std::time::Duration;

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
pub(super) fn interval_bounds(
    filter: &Expr,
    j: &Join,
    left: &Stream,
    right: &Stream,
) -> (Option<Duration>, Option<Duration>) {
    let (mut keep_left, mut keep_right): (Option<i128>, Option<i128>) = (None, None);
    for (op, d) in split_conjunction(filter)
        .into_iter()
        .filter_map(|c| time_comparison(c, j, left, right))
    {
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

/// The exact time condition of an outer interval join: `Some` when every conjunct of
/// `filter` compares the two sides' event times and they bound `r.t - l.t` from both
/// sides (the tightest bound of each kind wins).
pub(super) fn interval_condition(
    filter: &Expr,
    j: &Join,
    left: &Stream,
    right: &Stream,
) -> Option<IntervalCondition> {
    let (mut lower, mut upper): (Option<TimeBound>, Option<TimeBound>) = (None, None);
    for c in split_conjunction(filter) {
        let (op, d) = time_comparison(c, j, left, right)?;
        let nanos = i64::try_from(d).ok()?;
        let bound = TimeBound {
            nanos,
            strict: matches!(op, Operator::Gt | Operator::Lt),
        };
        match op {
            Operator::GtEq | Operator::Gt => {
                // The larger lower bound is the tighter (at a tie, the strict one).
                if lower.is_none_or(|l| (l.nanos, l.strict) < (bound.nanos, bound.strict)) {
                    lower = Some(bound);
                }
            }
            Operator::LtEq | Operator::Lt => {
                if upper.is_none_or(|u| (u.nanos, !u.strict) > (bound.nanos, !bound.strict)) {
                    upper = Some(bound);
                }
            }
            _ => return None,
        }
    }
    Some(IntervalCondition {
        lower: lower?,
        upper: upper?,
    })
}

/// A conjunct comparing the two sides' event times, as `r.t op l.t + d` (`d` in ns):
/// each side a term `t`, `t + interval` or `t - interval` (for an event-time column of
/// epoch milliseconds, `t ± n` with `n` in milliseconds).
fn time_comparison(c: &Expr, j: &Join, left: &Stream, right: &Stream) -> Option<(Operator, i128)> {
    let n_left = j.left.schema().fields().len();
    // A term over an event-time column: (is it the right side's, offset in ns).
    let term = |e: &Expr| -> Option<(bool, i128)> {
        let (i, offset) = time_term(e, j)?;
        if i < n_left {
            (left.event_time == Some(i)).then_some((false, offset))
        } else {
            (right.event_time == Some(i - n_left)).then_some((true, offset))
        }
    };
    let (a, op, b) = comparison(c)?;
    let ((a_right, oa), (b_right, ob)) = (term(a)?, term(b)?);
    match (a_right, b_right) {
        (true, false) => Some((*op, ob - oa)),
        (false, true) => Some((op.swap()?, oa - ob)),
        _ => None,
    }
}

/// A term `t`, `t + interval` or `t - interval` (for a column of epoch milliseconds,
/// `t ± n` with `n` in milliseconds), `t` a column of `j`'s output, perhaps cast: its
/// index there and the offset in ns.
pub(super) fn time_term(e: &Expr, j: &Join) -> Option<(usize, i128)> {
    let (column, offset) = match e {
        Expr::BinaryExpr(BinaryExpr {
            left: a,
            op,
            right: b,
        }) => {
            let n = interval_nanos(b).or_else(|| millis_nanos(a, b, j))?;
            match op {
                Operator::Plus => (a.as_ref(), n),
                Operator::Minus => (a.as_ref(), -n),
                _ => return None,
            }
        }
        e => (e, 0),
    };
    // Only a cast that keeps every instant: a timestamp to nanoseconds.
    let (column, cast_to) = match column {
        Expr::Cast(c) => (c.expr.as_ref(), Some(c.field.data_type())),
        e => (e, None),
    };
    let Expr::Column(c) = column else { return None };
    let i = j.schema.index_of_column(c).ok()?;
    let exact = match cast_to {
        None => true,
        Some(to) => {
            matches!(to, DataType::Timestamp(TimeUnit::Nanosecond, _))
                && matches!(j.schema.field(i).data_type(), DataType::Timestamp(..))
        }
    };
    exact.then_some((i, offset))
}

/// `n` of `column ± n` as nanoseconds, when `column` is a BIGINT column (an event time
/// in epoch milliseconds) and `n` an integer literal.
fn millis_nanos(column: &Expr, n: &Expr, j: &Join) -> Option<i128> {
    let Expr::Column(c) = column else { return None };
    let field = j.schema.field(j.schema.index_of_column(c).ok()?);
    if field.data_type() != &DataType::Int64 {
        return None;
    }
    let Expr::Literal(ScalarValue::Int64(Some(ms)), _) = n else {
        return None;
    };
    Some(i128::from(*ms) * 1_000_000)
}

/// `a op b` of a binary expression.
pub(super) fn comparison(e: &Expr) -> Option<(&Expr, &Operator, &Expr)> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => Some((left, op, right)),
        _ => None,
    }
}
