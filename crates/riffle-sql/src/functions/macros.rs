//! Functions declared in the pipeline as SQL expressions:
//! `CREATE FUNCTION count_char(s VARCHAR, c VARCHAR) RETURNS BIGINT AS '<expression>'`.
//! A call is replaced by the expression with each parameter replaced by its argument
//! (and cast to the declared return type) before DataFusion plans the query. Flink's
//! `CREATE FUNCTION name AS 'java.Class'` is refused where it is parsed (`script/clauses.rs`):
//! riffle runs no JVM.

use crate::error::{Result, SqlError};
use datafusion::sql::sqlparser::ast::{
    visit_expressions_mut, CreateFunction, CreateFunctionBody, Expr, FunctionReturnType, Value,
    ValueWithSpan, VisitMut,
};
use std::ops::ControlFlow;

/// One declared function.
#[derive(Debug, Clone)]
pub struct SqlMacro {
    /// Its name, lower-cased (function names are case-insensitive).
    name: String,
    params: Vec<String>,
    /// The body, with the macros declared before it expanded.
    body: Expr,
    /// `RETURNS type`, as SQL text.
    returns: Option<String>,
}

/// The macro a `CREATE FUNCTION` declares, expanding `earlier` macros in its body.
///
/// # Errors
/// No parameter list, a language other than SQL, or a body that is not an expression.
pub fn define(create: &CreateFunction, earlier: &[SqlMacro]) -> Result<SqlMacro> {
    let name = create.name.to_string();
    let usage = "write CREATE FUNCTION name(a VARCHAR, …) RETURNS BIGINT AS '<SQL expression of a, …>'; native functions are Rust (docs/rust-api.md)";
    if let Some(language) = &create.language {
        if !language.value.eq_ignore_ascii_case("sql") {
            return Err(SqlError::unsupported(
                format!("CREATE FUNCTION {name} … LANGUAGE {language}"),
                usage,
            ));
        }
    }
    let params = create
        .args
        .as_ref()
        .ok_or_else(|| {
            SqlError::unsupported(format!("CREATE FUNCTION {name} without parameters"), usage)
        })?
        .iter()
        .map(|a| {
            a.name.as_ref().map(|n| n.value.clone()).ok_or_else(|| {
                SqlError::unsupported(format!("an unnamed parameter of {name}"), usage)
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let body = match &create.function_body {
        Some(
            CreateFunctionBody::AsBeforeOptions { body, .. }
            | CreateFunctionBody::AsAfterOptions(body)
            | CreateFunctionBody::Return(body)
            | CreateFunctionBody::AsReturnExpr(body),
        ) => body,
        _ => return Err(SqlError::unsupported(format!("the body of {name}"), usage)),
    };
    let mut body = match body {
        Expr::Value(ValueWithSpan {
            value: Value::SingleQuotedString(text) | Value::DoubleQuotedString(text),
            ..
        }) => super::parse_expr(text)?,
        other => other.clone(),
    };
    expand_macros(&mut body, earlier)?;
    let returns = match &create.return_type {
        Some(FunctionReturnType::DataType(t)) => Some(t.to_string()),
        Some(other) => {
            return Err(SqlError::unsupported(
                format!("RETURNS {other} of {name}"),
                usage,
            ))
        }
        None => None,
    };
    Ok(SqlMacro {
        name: name.to_lowercase(),
        params,
        body,
        returns,
    })
}

/// Replaces every call of a macro in `node` by its body.
///
/// # Errors
/// A call with the wrong number of arguments, named.
pub fn expand_macros<N: VisitMut>(node: &mut N, macros: &[SqlMacro]) -> Result<()> {
    if macros.is_empty() {
        return Ok(());
    }
    super::replace_expressions(node, |expr| expansion(expr, macros))
}

fn expansion(expr: &Expr, macros: &[SqlMacro]) -> Result<Option<Expr>> {
    let Expr::Function(f) = expr else {
        return Ok(None);
    };
    let name = f.name.to_string().to_lowercase();
    let Some(m) = macros.iter().find(|m| m.name == name) else {
        return Ok(None);
    };
    let Some(args) = super::plain_args(f) else {
        return Err(SqlError::plan(format!(
            "{name} takes plain arguments: {expr}"
        )));
    };
    if args.len() != m.params.len() {
        return Err(SqlError::plan(format!(
            "{name} takes {} argument(s) ({}), not {}",
            m.params.len(),
            m.params.join(", "),
            args.len()
        )));
    }
    let mut body = m.body.clone();
    let _ = visit_expressions_mut(&mut body, |e| {
        if let Expr::Identifier(ident) = e {
            if let Some(i) = m.params.iter().position(|p| *p == ident.value) {
                *e = Expr::Nested(Box::new(args[i].clone()));
            }
        }
        ControlFlow::<()>::Continue(())
    });
    Ok(Some(match &m.returns {
        Some(t) => super::parse_expr(&format!("CAST(({body}) AS {t})"))?,
        None => Expr::Nested(Box::new(body)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::ast::Statement;

    fn macros(sql: &str) -> Result<Vec<SqlMacro>> {
        let script = crate::script::parse(sql)?;
        let mut out: Vec<SqlMacro> = Vec::new();
        for s in &script.statements {
            if let Statement::CreateFunction(c) = s {
                let m = define(c, &out)?;
                out.push(m);
            }
        }
        Ok(out)
    }

    #[test]
    fn a_call_becomes_the_body_with_its_arguments() {
        let m = macros(
            "CREATE FUNCTION count_char(s VARCHAR, c VARCHAR) RETURNS BIGINT AS 'char_length(s) - char_length(replace(s, c, ''''))';",
        )
        .unwrap();
        let mut e = super::super::parse_expr("count_char(extra, 'c') + 1").unwrap();
        expand_macros(&mut e, &m).unwrap();
        assert_eq!(
            e.to_string(),
            "CAST((char_length((extra)) - char_length(replace((extra), ('c'), ''))) AS BIGINT) + 1"
        );
    }

    #[test]
    fn macros_may_call_earlier_macros() {
        let m = macros(
            "CREATE FUNCTION twice(x BIGINT) AS 'x * 2';\nCREATE FUNCTION quad(y BIGINT) AS 'twice(twice(y))';",
        )
        .unwrap();
        let mut e = super::super::parse_expr("quad(price)").unwrap();
        expand_macros(&mut e, &m).unwrap();
        assert_eq!(e.to_string(), "((((((price)) * 2)) * 2))");
    }

    #[test]
    fn wrong_calls_and_other_languages_are_refused() {
        let m = macros("CREATE FUNCTION twice(x BIGINT) AS 'x * 2';").unwrap();
        let mut e = super::super::parse_expr("twice(1, 2)").unwrap();
        let err = expand_macros(&mut e, &m).unwrap_err().to_string();
        assert!(
            err.contains("twice takes 1 argument(s) (x), not 2"),
            "{err}"
        );
        let err = macros("CREATE FUNCTION f(x BIGINT) AS 'return x' LANGUAGE python;")
            .unwrap_err()
            .to_string();
        assert!(err.contains("LANGUAGE python"), "{err}");
    }
}
