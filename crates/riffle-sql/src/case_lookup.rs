//! `CASE` that maps one value to labels, evaluated as a table lookup.
//!
//! ```sql
//! CASE WHEN x = 'apple' THEN '0' WHEN x = 'google' THEN '1' … ELSE y END
//! ```
//!
//! DataFusion evaluates a searched `CASE` branch by branch: each `WHEN` on the rows no
//! earlier branch took, copying those rows for the next branch — q21's four branches
//! copied its text columns eight times per batch. DataFusion has a lookup table for the
//! simple form `CASE x WHEN 'apple' THEN '0' … ELSE <literal> END`, one hash probe per
//! row. After optimizing, riffle rewrites the searched form into it when every `WHEN`
//! compares the same `x` with a text or integer literal, every `THEN` is a literal that
//! is not NULL, and the `ELSE` is a literal, absent, or a column. With a column `y`, the
//! lookup has no `ELSE` and [`or_else`] takes `y` where it found nothing: no label is
//! NULL, so "nothing found" is exactly "no branch matched". A column costs nothing to
//! read on every row, so reading it on rows a branch took changes nothing; any other
//! `ELSE` could fail on rows the query never evaluated it on, and is left alone.

use datafusion::arrow::array::Array;
use datafusion::arrow::compute::{is_not_null, kernels::zip::zip};
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{exec_err, Result, ScalarValue};
use datafusion::logical_expr::expr::{Case, ScalarFunction};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{
    BinaryExpr, ColumnarValue, Expr, LogicalPlan, Operator, Projection, ReturnFieldArgs,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use std::sync::Arc;

/// `plan` with every projected mapping `CASE` (see the module docs) as a lookup.
///
/// # Errors
/// A rewritten projection whose schema does not build (a bug: types are kept).
pub(crate) fn case_lookups(plan: LogicalPlan) -> Result<LogicalPlan> {
    plan.transform_up(|node| {
        let LogicalPlan::Projection(p) = node else {
            return Ok(Transformed::no(node));
        };
        let mut changed = false;
        let mut exprs = Vec::with_capacity(p.expr.len());
        for e in &p.expr {
            // The projection's output names stay as they were.
            let saved = NamePreserver::new_for_projection().save(e);
            let new = e.clone().transform_up(|e| Ok(as_lookup(e)))?;
            changed |= new.transformed;
            exprs.push(saved.restore(new.data));
        }
        if !changed {
            return Ok(Transformed::no(LogicalPlan::Projection(p)));
        }
        Ok(Transformed::yes(LogicalPlan::Projection(
            Projection::try_new(exprs, p.input)?,
        )))
    })
    .map(|t| t.data)
}

/// `expr` as a lookup, when it is a mapping `CASE`.
fn as_lookup(expr: Expr) -> Transformed<Expr> {
    let Expr::Case(case) = &expr else {
        return Transformed::no(expr);
    };
    let Some((x, pairs)) = mapping(case) else {
        return Transformed::no(expr);
    };
    let else_expr = case.else_expr.as_deref();
    let fallback = match else_expr {
        None | Some(Expr::Literal(..)) => None,
        Some(Expr::Column(_)) => else_expr.cloned(),
        Some(_) => return Transformed::no(expr),
    };
    let lookup = Expr::Case(Case::new(
        Some(Box::new(x)),
        pairs,
        match fallback {
            None => case.else_expr.clone(),
            Some(_) => None,
        },
    ));
    Transformed::yes(match fallback {
        None => lookup,
        Some(y) => Expr::ScalarFunction(ScalarFunction::new_udf(
            Arc::new(or_else()),
            vec![lookup, y],
        )),
    })
}

/// The compared expression and the (value, label) pairs, when every branch of `case`
/// is `x = value` (either way round) with a text or integer value, labelled by a
/// literal that is not NULL.
#[allow(clippy::type_complexity)]
fn mapping(case: &Case) -> Option<(Expr, Vec<(Box<Expr>, Box<Expr>)>)> {
    if case.expr.is_some() || case.when_then_expr.len() < 2 {
        return None;
    }
    let mut x: Option<&Expr> = None;
    let mut pairs = Vec::with_capacity(case.when_then_expr.len());
    for (when, then) in &case.when_then_expr {
        let Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) = when.as_ref()
        else {
            return None;
        };
        let (compared, value) = match (left.as_ref(), right.as_ref()) {
            (Expr::Literal(..), Expr::Literal(..)) => return None,
            (v @ Expr::Literal(..), c) | (c, v @ Expr::Literal(..)) => (c, v),
            _ => return None,
        };
        let Expr::Literal(value_scalar, _) = value else {
            return None;
        };
        if !is_lookup_key(value_scalar) || x.is_some_and(|x| x != compared) {
            return None;
        }
        if !matches!(then.as_ref(), Expr::Literal(label, _) if !label.is_null()) {
            return None;
        }
        x = Some(compared);
        pairs.push((Box::new(value.clone()), then.clone()));
    }
    Some((x?.clone(), pairs))
}

/// Whether a lookup on `value` finds what `=` finds: texts and integers (not floats,
/// whose `=` and hashing disagree on NaN and -0.0), not NULL.
fn is_lookup_key(value: &ScalarValue) -> bool {
    !value.is_null()
        && matches!(
            value.data_type(),
            DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::UInt8
                | DataType::UInt16
                | DataType::UInt32
                | DataType::UInt64
        )
}

/// `riffle_or_else(a, b)`: `a` where it is not NULL, else `b`; both evaluated on every
/// row (only ever given a column as `b`).
fn or_else() -> ScalarUDF {
    ScalarUDF::from(OrElse {
        signature: Signature::any(2, Volatility::Immutable),
    })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct OrElse {
    signature: Signature,
}

impl ScalarUDFImpl for OrElse {
    fn name(&self) -> &str {
        "riffle_or_else"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, types: &[DataType]) -> Result<DataType> {
        Ok(types[0].clone())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let [a, b] = args.arg_fields else {
            return exec_err!("riffle_or_else takes two arguments");
        };
        if a.data_type() != b.data_type() {
            return exec_err!(
                "riffle_or_else: {} and {} differ",
                a.data_type(),
                b.data_type()
            );
        }
        Ok(Arc::new(
            a.as_ref()
                .clone()
                .with_name(self.name())
                .with_nullable(b.is_nullable()),
        ))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let [a, b] = args.args.as_slice() else {
            return exec_err!("riffle_or_else takes two arguments");
        };
        let (a, b) = (a.to_array(n)?, b.to_array(n)?);
        if a.null_count() == 0 {
            return Ok(ColumnarValue::Array(a));
        }
        Ok(ColumnarValue::Array(zip(&is_not_null(&a)?, &a, &b)?))
    }
}

#[cfg(test)]
mod tests;
