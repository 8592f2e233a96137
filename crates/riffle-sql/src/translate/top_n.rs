//! `ROW_NUMBER() OVER (PARTITION BY … ORDER BY …)` bounded by a filter on the row
//! number (`WHERE rn <= N`, `rn < N`, `rn = 1`; with a rank range, `rn BETWEEN 2 AND 3`,
//! `rn > 1 AND rn <= 3`, `rn = 2`, `rn <> 1`): Flink's Top-N and deduplication, run by
//! riffle's `TopNFactory` as an updating result keyed by the partition and the rank
//! (the partition alone when `N = 1`). Partitioned by a window's end (Flink's Window
//! Top-N), each window's top rows leave once, when the window closes: append-only.
//! Read by a filter or an aggregate, or over a changelog (an unwindowed GROUP BY), it
//! emits a changelog.

use super::{fresh_name, Stream, Translator, WindowPart};
use crate::error::{Result, SqlError};
use crate::windows::unaliased;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Column, ScalarValue};
use datafusion::logical_expr::expr::WindowFunction;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{BinaryExpr, Expr, Filter, LogicalPlan, Operator, Window};
use datafusion::prelude::lit;
use riffle_operators::{OrderColumn, TopNFactory};
use std::sync::Arc;

/// The comparisons of a column with an integer constant in `predicate`: `rn <= 3`,
/// `1 < rn`, `rn BETWEEN 2 AND 3` (two), `rn <> 1`.
fn compared_with_constants(predicate: &Expr) -> Vec<(&Column, Operator, i64)> {
    fn int(e: &Expr) -> Option<i64> {
        let v = match unaliased(e) {
            Expr::Literal(v, _) => v,
            Expr::Cast(c) => match c.expr.as_ref() {
                Expr::Literal(v, _) => v,
                _ => return None,
            },
            _ => return None,
        };
        // A whole number only: `rn < 2.5` is not `rn < 2`.
        let whole = match v {
            ScalarValue::Float64(Some(f)) => f.fract() == 0.0,
            ScalarValue::Float32(Some(f)) => f.fract() == 0.0,
            ScalarValue::Decimal128(Some(d), _, scale) => {
                u32::try_from(*scale).map_or(true, |s| d % 10i128.pow(s) == 0)
            }
            other => other.data_type().is_integer(),
        };
        if !whole {
            return None;
        }
        match v.cast_to(&DataType::Int64).ok()? {
            ScalarValue::Int64(Some(n)) => Some(n),
            _ => None,
        }
    }
    // The comparisons a rank range is made of; `IS DISTINCT FROM` and the rest are not.
    let comparison = |op: &Operator| {
        matches!(
            op,
            Operator::Lt
                | Operator::LtEq
                | Operator::Eq
                | Operator::GtEq
                | Operator::Gt
                | Operator::NotEq
        )
    };
    fn column(e: &Expr) -> Option<&Column> {
        match unaliased(e) {
            Expr::Column(c) => Some(c),
            Expr::Cast(c) => match c.expr.as_ref() {
                Expr::Column(c) => Some(c),
                _ => None,
            },
            _ => None,
        }
    }
    match predicate {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) if comparison(op) => {
            match (column(left), int(right), column(right), int(left)) {
                (Some(c), Some(n), _, _) => vec![(c, *op, n)],
                // `N >= rn` turned around.
                (_, _, Some(c), Some(n)) => op.swap().map(|op| (c, op, n)).into_iter().collect(),
                _ => vec![],
            }
        }
        Expr::Between(b) if !b.negated => match (column(&b.expr), int(&b.low), int(&b.high)) {
            (Some(c), Some(low), Some(high)) => {
                vec![(c, Operator::GtEq, low), (c, Operator::LtEq, high)]
            }
            _ => vec![],
        },
        _ => vec![],
    }
}

/// The ranks a filter on a row number keeps: Flink's constant rank range
/// `[first, last]`, less the ranks it names with `<>`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RankRange {
    first: i64,
    last: Option<i64>,
    excluded: Vec<i64>,
}

impl RankRange {
    /// The range of the comparisons of one column with constants.
    fn of(comparisons: &[(Operator, i64)]) -> Self {
        let mut range = RankRange {
            first: 1,
            last: None,
            excluded: Vec::new(),
        };
        let mut at_most = |n: i64| range.last = Some(range.last.map_or(n, |l| l.min(n)));
        let mut lows = Vec::new();
        for &(op, n) in comparisons {
            match op {
                Operator::LtEq => at_most(n),
                Operator::Lt => at_most(n.saturating_sub(1)),
                Operator::Eq => {
                    at_most(n);
                    lows.push(n);
                }
                Operator::GtEq => lows.push(n),
                Operator::Gt => lows.push(n.saturating_add(1)),
                Operator::NotEq => range.excluded.push(n),
                _ => {}
            }
        }
        range.first = lows.into_iter().fold(1, i64::max);
        range
    }

    /// Whether ranks below the first or named ranks are left out, which a filter on the
    /// Top-N's rank does.
    fn filters(&self) -> bool {
        self.first > 1 || self.last.is_some_and(|l| l < 1) || !self.excluded.is_empty()
    }

    /// The filter on the rank column `rank` (Int64) keeping the range's ranks.
    fn predicate(&self, rank: &Column) -> Option<Expr> {
        let rank = || Expr::Column(rank.clone());
        let at_least = (self.first > 1).then(|| rank().gt_eq(lit(self.first)));
        let none = self.last.is_some_and(|l| l < 1).then(|| lit(false));
        let not = self.excluded.iter().map(|&n| rank().not_eq(lit(n)));
        at_least
            .into_iter()
            .chain(none)
            .chain(not)
            .reduce(Expr::and)
    }
}

/// The `Window` node under `plan` whose field `window_at` is field `k` of `plan`,
/// through aliases and column-only projections.
fn window_below(plan: &LogicalPlan, k: usize) -> Option<(&Window, usize)> {
    match plan {
        LogicalPlan::SubqueryAlias(a) => window_below(&a.input, k),
        LogicalPlan::Projection(p) => match unaliased(p.expr.get(k)?) {
            Expr::Column(c) => window_below(&p.input, p.input.schema().index_of_column(c).ok()?),
            _ => None,
        },
        LogicalPlan::Window(w) => Some((w, k)),
        _ => None,
    }
}

impl Translator<'_> {
    /// A filter bounding a `ROW_NUMBER()` as a Top-N, or `None` when `f` is not one.
    pub(super) fn top_n(&mut self, f: &Filter) -> Result<Option<Stream>> {
        let mut changelog = std::mem::take(&mut self.changelog_wanted);
        // `rn <= N AND price > 5`: the other conjuncts filter the ranked rows (DataFusion
        // merges a filter over the Top-N into its WHERE).
        let conjuncts = split_conjunction(&f.predicate);
        // The row number: a column compared with a constant that a ROW_NUMBER() computes.
        let ranked_at = |column: &Column| -> Option<(&Window, usize, &WindowFunction)> {
            let k = f.input.schema().index_of_column(column).ok()?;
            let (window, at) = window_below(&f.input, k)?;
            let inputs = window.input.schema().fields().len();
            let expr = window.window_expr.get(at.checked_sub(inputs)?)?;
            match unaliased(expr) {
                Expr::WindowFunction(function) if function.fun.name() == "row_number" => {
                    Some((window, at, function))
                }
                _ => None,
            }
        };
        let Some((column, (window, at, function))) = conjuncts.iter().find_map(|c| {
            compared_with_constants(c)
                .into_iter()
                .find_map(|(column, _, _)| Some((column.clone(), ranked_at(column)?)))
        }) else {
            // A row number compared otherwise (`rn < 2.5`): name the condition.
            let on_rank = conjuncts.iter().find(|c| {
                c.column_refs()
                    .iter()
                    .any(|column| ranked_at(column).is_some())
            });
            if let Some(condition) = on_rank {
                return Err(SqlError::unsupported(
                    format!("the condition `{condition}` on a row number"),
                    "compare the row number with whole numbers: rn <= 3, rn > 1, rn BETWEEN 2 AND 3, rn <> 2",
                ));
            }
            return Ok(None);
        };
        // Every comparison of it with a constant makes the rank range; the rest of the
        // WHERE filters the ranked rows.
        let mut comparisons = Vec::new();
        let mut rest = Vec::new();
        for c in &conjuncts {
            let of_rank = compared_with_constants(c);
            if !of_rank.is_empty() && of_rank.iter().all(|(k, _, _)| **k == column) {
                comparisons.extend(of_rank.iter().map(|(_, op, n)| (*op, *n)));
            } else {
                rest.push((*c).clone());
            }
        }
        let range = RankRange::of(&comparisons);
        let Some(last) = range.last else {
            return Err(SqlError::unsupported(
                "a ROW_NUMBER() filtered without an upper bound (`rn > 1`)",
                "bound it, as Flink's Top-N needs a rank end: WHERE rn <= N, or rn BETWEEN 2 AND N",
            ));
        };
        // No rank can pass (`rn < 1`): a Top-N of one row whose filter keeps nothing.
        let limit = usize::try_from(last.max(1)).unwrap_or(1);
        if let Some(other) = rest.iter().find(|c| c.column_refs().contains(&column)) {
            return Err(SqlError::unsupported(
                format!("the condition `{other}` on a row number"),
                "compare the row number with whole numbers: rn <= 3, rn > 1, rn BETWEEN 2 AND 3, rn <> 2",
            ));
        }
        let rest = rest.into_iter().reduce(Expr::and);
        changelog |= rest.is_some() || range.filters();
        if window.window_expr.len() != 1 {
            return Err(SqlError::unsupported(
                "ROW_NUMBER() beside other OVER (…) functions in one SELECT",
                "compute the row number in a subquery of its own",
            ));
        }
        let params = &function.params;
        let in_schema = window.input.schema();
        // Over an unwindowed GROUP BY the Top-N reads its changelog, and emits one.
        let input = self.translate_as_changelog(&window.input)?;
        if input.updating.is_some() && !input.changelog {
            return Err(SqlError::unsupported(
                "a Top-N over an updating result that is not a changelog (an OVER window's)",
                "rank the rows the OVER window reads, or an unwindowed GROUP BY",
            ));
        }
        let input = self.materialize_unless(&input, None)?;
        let input = self.prune(&input)?;
        let name_of = |e: &Expr, what: &str| -> Result<String> {
            match e {
                Expr::Column(c) => Ok(input.columns[in_schema.index_of_column(c)?].clone()),
                other => Err(SqlError::unsupported(
                    format!("the {what} `{other}` of a ROW_NUMBER()"),
                    "compute it as a column in a subquery first",
                )),
            }
        };
        let partition = params
            .partition_by
            .iter()
            .map(|e| name_of(e, "PARTITION BY expression"))
            .collect::<Result<Vec<_>>>()?;
        if params.order_by.is_empty() {
            return Err(SqlError::unsupported(
                "ROW_NUMBER() without ORDER BY",
                "order the rows: ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC)",
            ));
        }
        let order = params
            .order_by
            .iter()
            .map(|s| {
                Ok(OrderColumn {
                    column: name_of(&s.expr, "ORDER BY expression")?,
                    descending: !s.asc,
                    nulls_first: s.nulls_first,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let taken = input.physical_columns();
        let rank = fresh_name("rank", &taken);
        let refs: Vec<&str> = partition.iter().map(String::as_str).collect();
        let schema = self.graph.schema(input.node).clone();
        let mut factory = TopNFactory::new(&schema, &refs, &order, limit, &rank)?;
        // Partitioned by a window's end (Flink's Window Top-N): each window's rows leave
        // once, when it closes — an append-only result.
        let window_end = params.partition_by.iter().find_map(|e| match e {
            Expr::Column(c) => {
                let k = in_schema.index_of_column(c).ok()?;
                let w = input.windows.get(k).copied().flatten()?;
                (w.part == WindowPart::End && !input.is_virtual(k))
                    .then(|| input.columns[k].clone())
            }
            _ => None,
        });
        match &window_end {
            Some(_) if input.changelog => {
                return Err(SqlError::unsupported(
                    "a Window Top-N over a changelog",
                    "rank the rows of a window aggregate, whose rows are final",
                ))
            }
            Some(end) => factory = factory.closing_windows(end)?,
            // A reader that filters or aggregates the ranks needs their withdrawals.
            None if changelog => factory = factory.changelog(),
            None => {}
        }
        let emits_changelog = factory.is_changelog();
        let p = Some(self.parallelism());
        let node = self.add("top_n", Arc::new(factory), p, &[input.node])?;
        let mut columns = input.columns.clone();
        columns.push(rank);
        let mut stream = Stream::of_node(node, columns);
        if window_end.is_some() {
            // Append-only: rows keep their event time.
            stream.event_time = input.event_time;
        } else {
            // Keyed by the partition, and by the rank when more than one row is kept.
            let mut keys: Vec<usize> = params
                .partition_by
                .iter()
                .filter_map(|e| match e {
                    Expr::Column(c) => in_schema.index_of_column(c).ok(),
                    _ => None,
                })
                .collect();
            if limit > 1 {
                keys.push(at);
            }
            stream.updating = Some(keys);
            stream.changelog = emits_changelog;
        }
        self.memo
            .insert(LogicalPlan::Window(window.clone()), stream);
        // The rank bound keeps every row the Top-N emits; the ranks below the range and
        // the rest of the WHERE are filters.
        let ranked = self.translate(&f.input)?;
        let filter = range
            .predicate(&column)
            .into_iter()
            .chain(rest)
            .reduce(Expr::and);
        match filter {
            Some(filter) => Ok(Some(self.filter(&ranked, &filter, f.input.schema())?)),
            None => Ok(Some(ranked)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(comparisons: &[(Operator, i64)]) -> (i64, Option<i64>, Vec<i64>) {
        let r = RankRange::of(comparisons);
        (r.first, r.last, r.excluded)
    }

    #[test]
    fn a_top_n_keeps_ranks_one_to_its_bound() {
        assert_eq!(range(&[(Operator::LtEq, 3)]), (1, Some(3), vec![]));
        assert_eq!(range(&[(Operator::Lt, 3)]), (1, Some(2), vec![]));
        assert_eq!(range(&[(Operator::Eq, 1)]), (1, Some(1), vec![]));
        assert!(!RankRange::of(&[(Operator::LtEq, 3)]).filters());
    }

    #[test]
    fn a_rank_range_keeps_the_runners_up() {
        // rn > 1 AND rn <= 3; rn BETWEEN 2 AND 3; rn = 2
        assert_eq!(
            range(&[(Operator::Gt, 1), (Operator::LtEq, 3)]),
            (2, Some(3), vec![])
        );
        assert_eq!(
            range(&[(Operator::GtEq, 2), (Operator::LtEq, 3)]),
            (2, Some(3), vec![])
        );
        assert_eq!(range(&[(Operator::Eq, 2)]), (2, Some(2), vec![]));
        assert!(RankRange::of(&[(Operator::Eq, 2)]).filters());
    }

    #[test]
    fn the_tightest_bounds_win_and_excluded_ranks_are_filtered() {
        let r = range(&[(Operator::LtEq, 5), (Operator::Lt, 4), (Operator::NotEq, 1)]);
        assert_eq!(r, (1, Some(3), vec![1]));
    }

    #[test]
    fn a_range_without_an_end_has_no_last_rank() {
        assert_eq!(range(&[(Operator::Gt, 1)]).1, None);
        assert_eq!(range(&[(Operator::NotEq, 1)]).1, None);
    }

    #[test]
    fn an_empty_range_keeps_nothing() {
        let r = RankRange::of(&[(Operator::Lt, 1)]);
        assert!(r.filters());
        let filter = r.predicate(&Column::from_name("rn")).unwrap();
        assert_eq!(filter.to_string(), "Boolean(false)");
    }
}
