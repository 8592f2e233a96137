//! The ranges of time a pipeline's scans filter each source table to, so that a source
//! can pass over input wholly outside them (Parquet row groups, by their statistics).
//!
//! Only what the optimized plan states plainly counts: a `Filter` right above a
//! `TableScan` whose conjuncts compare a timestamp column with a timestamp literal
//! (`<`, `<=`, `>`, `>=`, `=`, `BETWEEN`). A table qualifies when every scan of it, in
//! every statement, bounds the same column; its range is the union of theirs. The
//! filters stay in the plan: a source only reads less.

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, LogicalPlan, Operator, TableScan};
use riffle_core::TimeBounds;
use std::collections::{BTreeMap, HashMap};

/// Per table: a timestamp column (an index into the table's schema) every scan bounds,
/// and the union of the scans' ranges on it.
///
/// # Errors
/// A plan that cannot be walked.
pub(crate) fn time_bounds<'a>(
    plans: impl Iterator<Item = &'a LogicalPlan>,
) -> datafusion::common::Result<HashMap<String, (usize, TimeBounds)>> {
    // Each scan (by address) with the conjuncts of the filter right above it.
    let mut filtered: HashMap<*const LogicalPlan, Vec<Expr>> = HashMap::new();
    let mut scans: Vec<(String, BTreeMap<usize, TimeBounds>)> = Vec::new();
    for plan in plans {
        plan.apply_with_subqueries(|node| {
            match node {
                LogicalPlan::Filter(filter) => {
                    if let LogicalPlan::TableScan(_) = filter.input.as_ref() {
                        filtered.insert(
                            std::ptr::from_ref(filter.input.as_ref()),
                            split_conjunction(&filter.predicate)
                                .into_iter()
                                .cloned()
                                .collect(),
                        );
                    }
                }
                LogicalPlan::TableScan(scan) => {
                    let above = filtered
                        .remove(&std::ptr::from_ref(node))
                        .unwrap_or_default();
                    // With the filters pushed into the scan itself, were a table to take
                    // them.
                    let on = ranges(scan, above.iter().chain(&scan.filters));
                    scans.push((scan.table_name.table().to_string(), on));
                }
                _ => {}
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
    }
    let mut by_table: HashMap<String, Option<BTreeMap<usize, TimeBounds>>> = HashMap::new();
    for (table, on) in scans {
        let entry = by_table.entry(table).or_insert_with(|| Some(on.clone()));
        if let Some(common) = entry {
            // Only columns every scan bounds; their ranges joined.
            common.retain(|column, _| on.contains_key(column));
            for (column, bounds) in common.iter_mut() {
                *bounds = bounds.union(on[column]);
            }
            if common.is_empty() {
                *entry = None;
            }
        }
    }
    Ok(by_table
        .into_iter()
        .filter_map(|(table, common)| {
            let (column, bounds) = common?.into_iter().find(|(_, b)| b.is_bounded())?;
            Some((table, (column, bounds)))
        })
        .collect())
}

/// The ranges `conjuncts` (all of which hold) put on the timestamp columns of `scan`'s
/// table.
fn ranges<'e>(
    scan: &TableScan,
    conjuncts: impl Iterator<Item = &'e Expr>,
) -> BTreeMap<usize, TimeBounds> {
    let schema = scan.source.schema();
    let mut on: BTreeMap<usize, TimeBounds> = BTreeMap::new();
    for (name, bounds) in conjuncts.filter_map(range_of) {
        let Ok(column) = schema.index_of(&name) else {
            continue;
        };
        on.entry(column)
            .and_modify(|b| *b = b.intersection(bounds))
            .or_insert(bounds);
    }
    on
}

/// The column and range one comparison states, if it is a timestamp column against a
/// timestamp literal.
fn range_of(expr: &Expr) -> Option<(String, TimeBounds)> {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (column, value, op) = match (left.as_ref(), right.as_ref()) {
                (Expr::Column(c), Expr::Literal(v, _)) => (c, v, *op),
                (Expr::Literal(v, _), Expr::Column(c)) => (c, v, op.swap()?),
                _ => return None,
            };
            let at = utc_nanos(value)?;
            let bounds = match op {
                // `>` keeps the bound itself too: passing over less is always safe.
                Operator::Gt | Operator::GtEq => TimeBounds {
                    from: Some(at),
                    to: None,
                },
                Operator::Lt | Operator::LtEq => TimeBounds {
                    from: None,
                    to: Some(at),
                },
                Operator::Eq => TimeBounds {
                    from: Some(at),
                    to: Some(at),
                },
                _ => return None,
            };
            Some((column.name.clone(), bounds))
        }
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) => match (expr.as_ref(), low.as_ref(), high.as_ref()) {
            (Expr::Column(c), Expr::Literal(low, _), Expr::Literal(high, _)) => Some((
                c.name.clone(),
                TimeBounds {
                    from: Some(utc_nanos(low)?),
                    to: Some(utc_nanos(high)?),
                },
            )),
            _ => None,
        },
        _ => None,
    }
}

/// A timestamp literal without a zone or in UTC, as nanoseconds; `None` for anything
/// else, or past the nanosecond range.
fn utc_nanos(value: &ScalarValue) -> Option<i64> {
    let (v, per_unit, zone) = match value {
        ScalarValue::TimestampSecond(v, z) => (v, 1_000_000_000, z),
        ScalarValue::TimestampMillisecond(v, z) => (v, 1_000_000, z),
        ScalarValue::TimestampMicrosecond(v, z) => (v, 1_000, z),
        ScalarValue::TimestampNanosecond(v, z) => (v, 1, z),
        _ => return None,
    };
    if zone.as_deref().is_some_and(|z| z != "UTC") {
        return None;
    }
    v.as_ref()?.checked_mul(per_unit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::{col, lit};

    fn ts(seconds: i64) -> Expr {
        lit(ScalarValue::TimestampSecond(Some(seconds), None))
    }

    fn bounds(from: Option<i64>, to: Option<i64>) -> TimeBounds {
        let nanos = |s: Option<i64>| s.map(|s| s * 1_000_000_000);
        TimeBounds {
            from: nanos(from),
            to: nanos(to),
        }
    }

    #[test]
    fn comparisons_with_timestamp_literals_state_ranges_either_way_round() {
        let range = |e: Expr| range_of(&e);
        assert_eq!(
            range(col("ts").gt_eq(ts(10))),
            Some(("ts".into(), bounds(Some(10), None)))
        );
        assert_eq!(
            range(ts(10).gt(col("ts"))),
            Some(("ts".into(), bounds(None, Some(10))))
        );
        assert_eq!(
            range(col("ts").between(ts(5), ts(9))),
            Some(("ts".into(), bounds(Some(5), Some(9))))
        );
        assert_eq!(
            range(col("ts").eq(ts(7))),
            Some(("ts".into(), bounds(Some(7), Some(7))))
        );
        // Not a range: another operator, a negation, a non-literal, another zone.
        assert_eq!(range(col("ts").not_eq(ts(7))), None);
        assert_eq!(range(col("ts").not_between(ts(5), ts(9))), None);
        assert_eq!(range(col("ts").gt(col("other"))), None);
        let zoned = lit(ScalarValue::TimestampSecond(Some(1), Some("+01:00".into())));
        assert_eq!(range(col("ts").gt(zoned)), None);
        assert_eq!(range(col("n").gt(lit(5i64))), None);
    }

    #[test]
    fn literals_past_the_nanosecond_range_state_nothing() {
        assert_eq!(
            utc_nanos(&ScalarValue::TimestampSecond(Some(i64::MAX / 10), None)),
            None
        );
        assert_eq!(
            utc_nanos(&ScalarValue::TimestampMillisecond(
                Some(2),
                Some("UTC".into())
            )),
            Some(2_000_000)
        );
    }
}
