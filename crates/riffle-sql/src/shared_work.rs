//! Work a filter and the projections above it would both do, done once.
//!
//! `SELECT CASE … ELSE f(x) END … WHERE f(x) IS NOT NULL OR …` computes `f(x)` for every
//! row in the filter and again, for the rows kept, in the projection. DataFusion's
//! common-subexpression rule only looks inside one plan node, and its filter push-down
//! would undo a projection placed under the filter by hand. So after optimizing, riffle
//! rewrites
//!
//! ```text
//! Projection* ── Filter(p(f(x))) ── input
//! ```
//!
//! into
//!
//! ```text
//! Projection*[f(x) → s] ── Filter(p(s)) ── Projection(needed columns, f(x) AS s) ── input
//! ```
//!
//! when `f(x)` contains a function call, the filter evaluates it on every row (not only
//! in the right side of `AND`/`OR` or a branch of `CASE`, which may skip rows — moving
//! such an expression before the filter could evaluate it on rows it never saw, and fail
//! there), and a projection above computes it again. The hoisting projection keeps only
//! the columns still needed, so a text used only by `f` is not copied by the filter.
//! See docs/engine.md, "Stateless chains".

use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, Result};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{Expr, Filter, LogicalPlan, Operator, Projection};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Prefix of the columns that carry a shared expression's value.
const SHARED_PREFIX: &str = "__riffle_shared_";

/// `plan` with every filter's shared work done once (see the module docs).
///
/// # Errors
/// A rewritten node whose schema does not build (a bug: the rewrite keeps schemas).
pub(crate) fn share_filter_work(plan: LogicalPlan) -> Result<LogicalPlan> {
    plan.transform_down(share_below).map(|t| t.data)
}

/// Rewrites `node` when it tops a chain of projections over a filter with shared work.
fn share_below(node: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    let Some((chain, filter)) = projections_over_filter(&node) else {
        return Ok(Transformed::no(node));
    };
    let shared = shared_expressions(&chain, filter);
    if shared.is_empty() {
        return Ok(Transformed::no(node));
    }
    let taken: HashSet<String> = chain
        .iter()
        .flat_map(|p| p.schema.fields().iter().map(|f| f.name().clone()))
        .chain(
            filter
                .input
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone()),
        )
        .collect();
    let names: Vec<String> = (0..)
        .map(|i| format!("{SHARED_PREFIX}{i}"))
        .filter(|n| !taken.contains(n))
        .take(shared.len())
        .collect();

    // The filter, reading the shared values.
    let mut predicate = filter.predicate.clone();
    for (s, name) in shared.iter().zip(&names) {
        predicate = replace(predicate, &s.expr, name)?;
    }
    // The projections, reading them too and passing them up while a higher one needs
    // them; each rewritten from the bottom.
    let mut rewritten: Vec<Vec<Expr>> = Vec::with_capacity(chain.len());
    for (level, p) in chain.iter().enumerate() {
        let mut exprs = Vec::with_capacity(p.expr.len());
        for e in &p.expr {
            // The projection's output names stay as they were.
            let saved = NamePreserver::new_for_projection().save(e);
            let mut new = e.clone();
            for (s, name) in shared.iter().zip(&names) {
                if let Some(at_level) = s.at_level.get(level).and_then(Option::as_ref) {
                    new = replace(new, at_level, name)?;
                }
            }
            exprs.push(saved.restore(new));
        }
        for (s, name) in shared.iter().zip(&names) {
            if s.last_use > level {
                exprs.push(Expr::Column(Column::new_unqualified(name)));
            }
        }
        rewritten.push(exprs);
    }

    drop_unread(&mut rewritten);

    // The hoisting projection: the input's columns still read, then the shared values.
    let mut read: HashSet<Column> = predicate.column_refs().into_iter().cloned().collect();
    for e in &rewritten[0] {
        read.extend(e.column_refs().into_iter().cloned());
    }
    let input_schema = filter.input.schema();
    let mut hoisted: Vec<Expr> = input_schema
        .iter()
        .map(Column::from)
        .filter(|c| read.contains(c))
        .map(Expr::Column)
        .collect();
    for (s, name) in shared.iter().zip(&names) {
        hoisted.push(s.expr.clone().alias(name));
    }
    let hoist = LogicalPlan::Projection(Projection::try_new(hoisted, filter.input.clone())?);
    let mut plan = LogicalPlan::Filter(Filter::try_new(predicate, Arc::new(hoist))?);
    for exprs in rewritten {
        plan = LogicalPlan::Projection(Projection::try_new(exprs, Arc::new(plan))?);
    }
    Ok(Transformed::yes(plan))
}

/// Drops from each projection but the top one the columns no projection above reads
/// any more (a text only the shared expression read is then not carried up).
fn drop_unread(levels: &mut [Vec<Expr>]) {
    for upper in (1..levels.len()).rev() {
        let read: HashSet<Column> = levels[upper]
            .iter()
            .flat_map(|e| e.column_refs().into_iter().cloned())
            .collect();
        let below = &mut levels[upper - 1];
        let first = below.first().cloned();
        below.retain(|e| {
            let (qualifier, name) = e.qualified_name();
            read.contains(&Column::new(qualifier, name))
        });
        if below.is_empty() {
            // A projection needs a column; an upper level of literals reads none.
            below.extend(first);
        }
    }
}

/// The projections from just above the filter up to `node`, and the filter, when
/// `node` tops such a chain over an input a hoisting projection may go on.
fn projections_over_filter(node: &LogicalPlan) -> Option<(Vec<&Projection>, &Filter)> {
    let mut chain = Vec::new();
    let mut at = node;
    while let LogicalPlan::Projection(p) = at {
        chain.push(p);
        at = &p.input;
    }
    let LogicalPlan::Filter(filter) = at else {
        return None;
    };
    // Over anything else (a window's ROW_NUMBER, a join, an aggregate) the filter has a
    // meaning of its own in translation; leave those alone.
    if chain.is_empty()
        || !matches!(
            filter.input.as_ref(),
            LogicalPlan::TableScan(_) | LogicalPlan::Projection(_)
        )
    {
        return None;
    }
    chain.reverse();
    Some((chain, filter))
}

/// An expression of the filter's input worth computing once.
struct Shared {
    /// Over the filter's input.
    expr: Expr,
    /// The same expression over each projection's input (`None` where a column it
    /// reads is not passed up unchanged).
    at_level: Vec<Option<Expr>>,
    /// The highest projection that computes it.
    last_use: usize,
}

/// The expressions the filter computes on every row that a projection above computes
/// again: the largest first, none inside another.
fn shared_expressions(chain: &[&Projection], filter: &Filter) -> Vec<Shared> {
    let renames = passed_up(chain, filter);
    let mut found: Vec<Shared> = Vec::new();
    let mut candidates = Vec::new();
    always_evaluated(&filter.predicate, &mut candidates);
    for candidate in candidates {
        // (`contains` includes the expression itself: no candidate is taken twice.)
        if !worth_sharing(candidate) || found.iter().any(|s| contains(&s.expr, candidate)) {
            continue;
        }
        let at_level: Vec<Option<Expr>> = renames
            .iter()
            .map(|rename| renamed(candidate, rename))
            .collect();
        let last_use = chain.iter().zip(&at_level).rposition(|(p, e)| {
            e.as_ref()
                .is_some_and(|e| p.expr.iter().any(|pe| contains(pe, e)))
        });
        if let Some(last_use) = last_use {
            found.push(Shared {
                expr: candidate.clone(),
                at_level,
                last_use,
            });
        }
    }
    found
}

/// Per projection of `chain`, the column each column of the filter's output is known
/// by in that projection's input (only columns passed up unchanged).
fn passed_up(chain: &[&Projection], filter: &Filter) -> Vec<HashMap<Column, Column>> {
    let mut level: HashMap<Column, Column> = filter
        .input
        .schema()
        .iter()
        .map(|f| (Column::from(f), Column::from(f)))
        .collect();
    let mut renames = Vec::with_capacity(chain.len());
    for p in chain {
        let mut next = HashMap::new();
        for (i, e) in p.expr.iter().enumerate() {
            let Expr::Column(c) = unaliased(e) else {
                continue;
            };
            if let Some((original, _)) = level.iter().find(|(_, now)| *now == c) {
                next.insert(original.clone(), Column::from(p.schema.qualified_field(i)));
            }
        }
        renames.push(std::mem::replace(&mut level, next));
    }
    renames
}

fn unaliased(e: &Expr) -> &Expr {
    match e {
        Expr::Alias(a) => unaliased(&a.expr),
        other => other,
    }
}

/// `expr` with its columns renamed, or `None` when one has no new name.
fn renamed(expr: &Expr, rename: &HashMap<Column, Column>) -> Option<Expr> {
    let mut missing = false;
    let out = expr
        .clone()
        .transform_up(|e| match e {
            Expr::Column(c) => match rename.get(&c) {
                Some(new) => Ok(Transformed::yes(Expr::Column(new.clone()))),
                None => {
                    missing = true;
                    Ok(Transformed::no(Expr::Column(c)))
                }
            },
            other => Ok(Transformed::no(other)),
        })
        .ok()?
        .data;
    (!missing).then_some(out)
}

/// Pushes `expr` and, in order, every sub-expression that is evaluated on every row
/// `expr` is evaluated on: `AND`/`OR` may skip their right side, `CASE` its branches,
/// and a short-circuiting function (`coalesce`) its later arguments.
fn always_evaluated<'a>(expr: &'a Expr, out: &mut Vec<&'a Expr>) {
    out.push(expr);
    let children: Vec<&Expr> = match expr {
        Expr::BinaryExpr(b) if matches!(b.op, Operator::And | Operator::Or) => vec![&b.left],
        Expr::BinaryExpr(b) => vec![&b.left, &b.right],
        Expr::Not(e)
        | Expr::IsNull(e)
        | Expr::IsNotNull(e)
        | Expr::IsTrue(e)
        | Expr::IsFalse(e)
        | Expr::IsUnknown(e)
        | Expr::IsNotTrue(e)
        | Expr::IsNotFalse(e)
        | Expr::IsNotUnknown(e)
        | Expr::Negative(e) => vec![e],
        Expr::Cast(c) => vec![&c.expr],
        Expr::TryCast(c) => vec![&c.expr],
        Expr::Like(l) | Expr::SimilarTo(l) => vec![&l.expr, &l.pattern],
        Expr::Between(b) => vec![&b.expr, &b.low, &b.high],
        Expr::InList(l) => std::iter::once(l.expr.as_ref()).chain(&l.list).collect(),
        Expr::ScalarFunction(f) if !f.func.short_circuits() => f.args.iter().collect(),
        Expr::Case(c) => c
            .expr
            .as_deref()
            .or_else(|| c.when_then_expr.first().map(|(when, _)| when.as_ref()))
            .into_iter()
            .collect(),
        _ => vec![],
    };
    for child in children {
        always_evaluated(child, out);
    }
}

/// Whether computing `expr` once is worth a column: it calls a function (plain
/// arithmetic and comparisons cost about what carrying their result costs) and gives
/// the same value each time it is evaluated.
fn worth_sharing(expr: &Expr) -> bool {
    let mut calls = false;
    let mut unsafe_to_move = false;
    let _ = expr.apply(|e| {
        match e {
            Expr::ScalarFunction(_) => calls = true,
            Expr::ScalarSubquery(_)
            | Expr::Exists(_)
            | Expr::InSubquery(_)
            | Expr::AggregateFunction(_)
            | Expr::WindowFunction(_)
            | Expr::Placeholder(_)
            | Expr::OuterReferenceColumn(..) => unsafe_to_move = true,
            _ => {}
        }
        Ok(TreeNodeRecursion::Continue)
    });
    calls && !unsafe_to_move && !expr.is_volatile()
}

fn contains(haystack: &Expr, needle: &Expr) -> bool {
    haystack.exists(|e| Ok(e == needle)).unwrap_or(false)
}

/// `expr` with every occurrence of `target` read from column `name`.
fn replace(expr: Expr, target: &Expr, name: &str) -> Result<Expr> {
    expr.transform_down(|e| {
        Ok(if &e == target {
            Transformed::new(
                Expr::Column(Column::new_unqualified(name)),
                true,
                TreeNodeRecursion::Jump,
            )
        } else {
            Transformed::no(e)
        })
    })
    .map(|t| t.data)
}

#[cfg(test)]
mod tests;
