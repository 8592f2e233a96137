//! What a plan looks like below its projections: the aggregate or join a join's side or
//! an aggregate's input really is, and whether a side holds one row per join key.

use super::aggregate::peel;
use super::join::column_index;
use datafusion::logical_expr::{Aggregate, Expr, Join, LogicalPlan};

/// Whether every row of `j`'s right side is unique on the columns it is joined on: it
/// is an aggregate whose group columns are all join columns.
pub(super) fn right_unique_on_keys(j: &Join) -> bool {
    unique_on(&j.right, j.on.iter().map(|(_, r)| r))
}

/// Whether every row of `j`'s left side is unique on the columns it is joined on.
pub(super) fn left_unique_on_keys(j: &Join) -> bool {
    unique_on(&j.left, j.on.iter().map(|(l, _)| l))
}

/// Whether `side` is an aggregate (below projections and filters, which keep a side's
/// uniqueness) whose group columns are all among `keys`.
fn unique_on<'e>(side: &LogicalPlan, keys: impl Iterator<Item = &'e Expr>) -> bool {
    let (LogicalPlan::Aggregate(agg), map) = below(side, true) else {
        return false;
    };
    let schema = side.schema();
    let on: Vec<usize> = keys
        .filter_map(|k| column_index(k, schema).ok())
        .filter_map(|i| map.get(i).copied())
        .collect();
    (0..agg.group_expr.len()).all(|g| on.contains(&g))
}

/// The aggregate below aliases and column-only projections, and for each field of
/// `plan` the aggregate's field it passes through.
pub(super) fn aggregate_below(plan: &LogicalPlan) -> Option<(&Aggregate, Vec<usize>)> {
    match below(plan, false) {
        (LogicalPlan::Aggregate(a), map) => Some((a, map)),
        _ => None,
    }
}

/// The join below aliases and column-only projections, and for each field of `plan`
/// the join's field it passes through.
pub(super) fn join_below(plan: &LogicalPlan) -> Option<(&Join, Vec<usize>)> {
    match below(plan, false) {
        (LogicalPlan::Join(j), map) => Some((j, map)),
        _ => None,
    }
}

/// Below aliases and column-only projections (and filters, with `filters`): the node,
/// and for each field of `plan` the field of that node it passes through.
fn below(plan: &LogicalPlan, filters: bool) -> (&LogicalPlan, Vec<usize>) {
    let (node, map) = passed_through(plan, filters);
    let map = map.unwrap_or_else(|| (0..node.schema().fields().len()).collect());
    (node, map)
}

/// [`below`]'s walk: `None` where `plan` is the node itself.
fn passed_through(plan: &LogicalPlan, filters: bool) -> (&LogicalPlan, Option<Vec<usize>>) {
    let plan = peel(plan);
    if let (LogicalPlan::Filter(f), true) = (plan, filters) {
        return passed_through(&f.input, filters);
    }
    if let LogicalPlan::Projection(p) = plan {
        let (node, inner) = passed_through(&p.input, filters);
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
