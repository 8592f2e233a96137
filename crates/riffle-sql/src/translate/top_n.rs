//! `ROW_NUMBER() OVER (PARTITION BY … ORDER BY …)` bounded by a filter on the row
//! number (`WHERE rn <= N`, `rn < N`, `rn = 1`): Flink's Top-N and deduplication, run by
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
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{BinaryExpr, Expr, Filter, LogicalPlan, Operator, Window};
use riffle_operators::{OrderColumn, TopNFactory};
use std::sync::Arc;

/// The row-number column `predicate` bounds and how many rows it keeps.
fn rank_bound(predicate: &Expr) -> Option<(&Column, usize)> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = predicate else {
        return None;
    };
    let int = |e: &Expr| match unaliased(e) {
        Expr::Literal(v, _) => match v.cast_to(&DataType::Int64).ok()? {
            ScalarValue::Int64(Some(n)) => Some(n),
            _ => None,
        },
        Expr::Cast(c) => match c.expr.as_ref() {
            Expr::Literal(v, _) => match v.cast_to(&DataType::Int64).ok()? {
                ScalarValue::Int64(Some(n)) => Some(n),
                _ => None,
            },
            _ => None,
        },
        _ => None,
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
    // `rn <= N`, or `N >= rn` turned around.
    let (c, op, n) = match (column(left), int(right), column(right), int(left)) {
        (Some(c), Some(n), _, _) => (c, *op, n),
        (_, _, Some(c), Some(n)) => (c, op.swap()?, n),
        _ => return None,
    };
    let limit = match op {
        Operator::LtEq => n,
        Operator::Lt => n - 1,
        Operator::Eq if n == 1 => 1,
        _ => return None,
    };
    Some((c, usize::try_from(limit).ok().filter(|l| *l > 0)?))
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
        let Some((bound, (column, limit))) = conjuncts
            .iter()
            .enumerate()
            .find_map(|(i, c)| Some((i, rank_bound(c)?)))
        else {
            return Ok(None);
        };
        let rest = conjuncts
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != bound)
            .map(|(_, c)| (*c).clone())
            .reduce(Expr::and);
        changelog |= rest.is_some();
        let Ok(k) = f.input.schema().index_of_column(column) else {
            return Ok(None);
        };
        let Some((window, at)) = window_below(&f.input, k) else {
            return Ok(None);
        };
        let inputs = window.input.schema().fields().len();
        let Some(expr) = at
            .checked_sub(inputs)
            .and_then(|i| window.window_expr.get(i))
        else {
            return Ok(None);
        };
        let Expr::WindowFunction(function) = unaliased(expr) else {
            return Ok(None);
        };
        if function.fun.name() != "row_number" {
            return Ok(None);
        }
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
        // The rank bound keeps every row the Top-N emits; the rest of the WHERE filters.
        let ranked = self.translate(&f.input)?;
        match rest {
            Some(rest) => Ok(Some(self.filter(&ranked, &rest, f.input.schema())?)),
            None => Ok(Some(ranked)),
        }
    }
}
