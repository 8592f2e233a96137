//! `GROUPING SETS`, `ROLLUP` and `CUBE` in a `GROUP BY` (windowed or not), run as Flink
//! defines them: the `UNION ALL` of one `GROUP BY` per grouping set, in which the
//! grouping columns of the other sets are NULL (outside aggregates). Rewritten on the
//! parsed query, before DataFusion plans it, so each branch is an aggregate riffle
//! already runs. `GROUPING()` and `GROUPING_ID()` are refused: a NULL of an absent
//! column is then indistinguishable from a NULL value, so write one query per grouping.

use crate::error::{Result, SqlError};
use datafusion::sql::sqlparser::ast::{
    Distinct, Expr, GroupByExpr, Query, Select, SelectItem, SetExpr, SetOperator, SetQuantifier,
    Value, VisitMut, VisitorMut,
};
use std::ops::ControlFlow;

/// The grouping sets of a `GROUP BY` list: plain expressions are in every set; each
/// `GROUPING SETS`, `ROLLUP` or `CUBE` multiplies the sets by its alternatives.
fn grouping_sets(group_by: &[Expr]) -> Vec<Vec<Expr>> {
    let mut sets: Vec<Vec<Expr>> = vec![Vec::new()];
    for e in group_by {
        let alternatives: Vec<Vec<Expr>> = match e {
            Expr::GroupingSets(sets) => sets.clone(),
            Expr::Rollup(parts) => (0..=parts.len())
                .rev()
                .map(|n| parts[..n].concat())
                .collect(),
            Expr::Cube(parts) => (0..1u64 << parts.len())
                .rev()
                .map(|mask| {
                    (0..parts.len())
                        .filter(|i| mask >> (parts.len() - 1 - i) & 1 == 1)
                        .flat_map(|i| parts[i].clone())
                        .collect()
                })
                .collect(),
            plain => vec![vec![plain.clone()]],
        };
        sets = sets
            .iter()
            .flat_map(|set| {
                alternatives.iter().map(move |alt| {
                    let mut s = set.clone();
                    s.extend(alt.iter().cloned());
                    s
                })
            })
            .collect();
    }
    sets
}

fn has_grouping_sets(group_by: &[Expr]) -> bool {
    group_by
        .iter()
        .any(|e| matches!(e, Expr::GroupingSets(_) | Expr::Rollup(_) | Expr::Cube(_)))
}

/// Replaces the grouping expressions `absent` with NULL outside aggregate calls and
/// outside the expressions the set groups by (`UPPER(channel)` grouped, `channel` not).
struct NullAbsent<'a> {
    /// Whether a function name is an aggregate's, as the planner knows them.
    is_aggregate: &'a dyn Fn(&str) -> bool,
    absent: &'a [String],
    present: &'a [String],
    /// Depth inside aggregate calls and present grouping expressions.
    kept: usize,
    grouping_function: Option<String>,
}

impl NullAbsent<'_> {
    fn keeps(&self, e: &Expr) -> bool {
        self.aggregate_call(e) || self.present.contains(&e.to_string())
    }

    /// A call of an aggregate, whose arguments are the rows of a group.
    fn aggregate_call(&self, e: &Expr) -> bool {
        matches!(e, Expr::Function(f) if f.over.is_none()
            && (self.is_aggregate)(&f.name.to_string().to_lowercase()))
    }
}

impl VisitorMut for NullAbsent<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if let Expr::Function(f) = e {
            let name = f.name.to_string().to_lowercase();
            if name == "grouping" || name == "grouping_id" {
                self.grouping_function = Some(name.to_uppercase());
            }
        }
        if self.keeps(e) {
            self.kept += 1;
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        // Nothing inside a kept expression changed, so it is recognized here again.
        if self.keeps(e) {
            self.kept -= 1;
        } else if self.kept == 0 && self.absent.contains(&e.to_string()) {
            *e = Expr::Value(Value::Null.into());
        }
        ControlFlow::Continue(())
    }
}

/// The `UNION ALL` of one `SELECT` per grouping set of `select` (a `UNION` when the
/// `SELECT` is `DISTINCT`: its rows are distinct over all the sets).
fn expanded(
    select: &Select,
    group_by: &[Expr],
    is_aggregate: &dyn Fn(&str) -> bool,
) -> Result<SetExpr> {
    let sets = grouping_sets(group_by);
    let quantifier =
        match &select.distinct {
            None => SetQuantifier::All,
            Some(Distinct::Distinct) => SetQuantifier::Distinct,
            Some(_) => return Err(SqlError::unsupported(
                "DISTINCT ON with GROUPING SETS / ROLLUP / CUBE",
                "select the grouped rows in a subquery and pick from them in the query around it",
            )),
        };
    let all: Vec<String> = sets.iter().flatten().map(ToString::to_string).collect();
    let mut branches = Vec::new();
    for set in &sets {
        let present: Vec<String> = set.iter().map(ToString::to_string).collect();
        let absent: Vec<String> = all
            .iter()
            .filter(|e| !present.contains(e))
            .cloned()
            .collect();
        let mut branch = select.clone();
        if sets.len() > 1 {
            branch.distinct = None;
        }
        // A column selected as itself keeps its name when it becomes NULL.
        for item in &mut branch.projection {
            if let SelectItem::UnnamedExpr(e) = item {
                let name = match e {
                    Expr::Identifier(i) => Some(i.clone()),
                    Expr::CompoundIdentifier(parts) => parts.last().cloned(),
                    _ => None,
                };
                if let Some(alias) = name.filter(|_| absent.contains(&e.to_string())) {
                    *item = SelectItem::ExprWithAlias {
                        expr: e.clone(),
                        alias,
                    };
                }
            }
        }
        let mut nulls = NullAbsent {
            is_aggregate,
            absent: &absent,
            present: &present,
            kept: 0,
            grouping_function: None,
        };
        let _ = branch.projection.visit(&mut nulls);
        let _ = branch.having.visit(&mut nulls);
        if let Some(name) = nulls.grouping_function {
            return Err(SqlError::unsupported(
                format!("{name}() of GROUPING SETS / ROLLUP / CUBE"),
                "riffle runs the grouping sets without their grouping ids: write one query per grouping",
            ));
        }
        let mut distinct: Vec<Expr> = Vec::new();
        for e in set {
            if !distinct.iter().any(|d| d.to_string() == e.to_string()) {
                distinct.push(e.clone());
            }
        }
        branch.group_by = GroupByExpr::Expressions(distinct, Vec::new());
        branches.push(SetExpr::Select(Box::new(branch)));
    }
    let mut branches = branches.into_iter();
    let first = branches
        .next()
        .ok_or_else(|| SqlError::plan("GROUPING SETS without a set"))?;
    Ok(branches.fold(first, |left, right| SetExpr::SetOperation {
        left: Box::new(left),
        op: SetOperator::Union,
        set_quantifier: quantifier,
        right: Box::new(right),
    }))
}

struct Expand<'a> {
    is_aggregate: &'a dyn Fn(&str) -> bool,
    refused: Option<SqlError>,
}

impl Expand<'_> {
    fn body(&mut self, body: &mut SetExpr) {
        match body {
            SetExpr::Select(select) => {
                let GroupByExpr::Expressions(group_by, modifiers) = &select.group_by else {
                    return;
                };
                if !has_grouping_sets(group_by) {
                    return;
                }
                if !modifiers.is_empty() {
                    self.refused = Some(SqlError::unsupported(
                        "GROUP BY … WITH ROLLUP / CUBE",
                        "write GROUP BY ROLLUP (a, b) or GROUPING SETS ((a, b), (a), ())",
                    ));
                    return;
                }
                let group_by = group_by.clone();
                match expanded(select, &group_by, self.is_aggregate) {
                    Ok(union) => *body = union,
                    Err(e) => self.refused = Some(e),
                }
            }
            SetExpr::SetOperation { left, right, .. } => {
                self.body(left);
                self.body(right);
            }
            _ => {}
        }
    }
}

impl VisitorMut for Expand<'_> {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        self.body(&mut query.body);
        match self.refused {
            Some(_) => ControlFlow::Break(()),
            None => ControlFlow::Continue(()),
        }
    }
}

/// Rewrites every `GROUP BY` with grouping sets in `query` into a `UNION ALL` of plain
/// `GROUP BY`s; `is_aggregate` tells an aggregate function's (lower-case) name, as the
/// planner registers them.
///
/// # Errors
/// `GROUPING()` / `GROUPING_ID()`, and `WITH ROLLUP` modifiers, named.
pub(crate) fn expand_grouping_sets(
    query: &mut Query,
    is_aggregate: &dyn Fn(&str) -> bool,
) -> Result<()> {
    let mut expand = Expand {
        is_aggregate,
        refused: None,
    };
    let _ = query.visit(&mut expand);
    match expand.refused {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::ast::Statement;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn rewritten(sql: &str) -> Result<String> {
        let Statement::Query(mut q) = Parser::parse_sql(&GenericDialect {}, sql)
            .unwrap()
            .remove(0)
        else {
            panic!("not a query");
        };
        // The planner's registry knows more; these are the tests' aggregates.
        expand_grouping_sets(&mut q, &|name| {
            ["count", "sum", "max", "mean"].contains(&name)
        })?;
        Ok(q.to_string())
    }

    #[test]
    fn each_grouping_set_is_a_group_by_with_the_other_sets_columns_null() {
        assert_eq!(
            rewritten("SELECT a, b, count(*) AS n FROM t GROUP BY GROUPING SETS ((a), (b))").unwrap(),
            "SELECT a, NULL AS b, count(*) AS n FROM t GROUP BY a UNION ALL SELECT NULL AS a, b, count(*) AS n FROM t GROUP BY b"
        );
    }

    #[test]
    fn rollup_and_cube_list_their_sets_and_plain_columns_are_in_each() {
        let rollup =
            rewritten("SELECT w, a, b, sum(a) AS s FROM t GROUP BY w, ROLLUP (a, b)").unwrap();
        assert_eq!(
            rollup,
            "SELECT w, a, b, sum(a) AS s FROM t GROUP BY w, a, b UNION ALL SELECT w, a, NULL AS b, sum(a) AS s FROM t GROUP BY w, a UNION ALL SELECT w, NULL AS a, NULL AS b, sum(a) AS s FROM t GROUP BY w"
        );
        let cube = rewritten("SELECT a, b, count(*) AS n FROM t GROUP BY CUBE (a, b)").unwrap();
        assert_eq!(cube.matches("UNION ALL").count(), 3, "{cube}");
        assert!(
            cube.ends_with("SELECT NULL AS a, NULL AS b, count(*) AS n FROM t"),
            "{cube}"
        );
    }

    #[test]
    fn a_grouped_expression_keeps_the_columns_it_is_made_of() {
        let out = rewritten(
            "SELECT UPPER(channel) AS uc, count(*) AS n FROM t GROUP BY GROUPING SETS ((channel), (UPPER(channel)))",
        )
        .unwrap();
        assert_eq!(
            out,
            // Flink 2.3: in the set (channel) the grouping expression UPPER(channel) is
            // absent, so NULL; in its own set it is computed from the row's channel.
            "SELECT NULL AS uc, count(*) AS n FROM t GROUP BY channel UNION ALL SELECT UPPER(channel) AS uc, count(*) AS n FROM t GROUP BY UPPER(channel)"
        );
    }

    #[test]
    fn select_distinct_is_distinct_over_all_the_sets() {
        let out =
            rewritten("SELECT DISTINCT a FROM t GROUP BY GROUPING SETS ((a), (a, b))").unwrap();
        assert_eq!(
            out,
            "SELECT a FROM t GROUP BY a UNION DISTINCT SELECT a FROM t GROUP BY a, b"
        );
    }

    #[test]
    fn columns_inside_aggregates_stay_and_grouping_ids_are_refused() {
        let out =
            rewritten("SELECT a, max(b) AS m FROM t GROUP BY GROUPING SETS ((a), (b))").unwrap();
        assert!(
            out.contains("SELECT NULL AS a, max(b) AS m FROM t GROUP BY b"),
            "{out}"
        );
        // An aggregate by another of its names (`mean` is `avg`) keeps its columns too.
        let out =
            rewritten("SELECT a, mean(b) AS m FROM t GROUP BY GROUPING SETS ((a), (b))").unwrap();
        assert!(
            out.contains("SELECT NULL AS a, mean(b) AS m FROM t GROUP BY b"),
            "{out}"
        );
        let e = rewritten("SELECT a, GROUPING(a) FROM t GROUP BY ROLLUP (a)").unwrap_err();
        assert!(e.to_string().contains("GROUPING()"), "{e}");
    }
}
