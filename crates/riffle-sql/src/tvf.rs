//! Flink's window table-valued functions:
//! `TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND))` and
//! `HOP(…, slide, size)` and `CUMULATE(…, step, max)` become the relation `t` with three
//! more columns,
//! `window_start`, `window_end` and `window_time` (`window_end` less 1 ms):
//!
//! ```sql
//! (SELECT *, tumble(ts, size)['start'] AS window_start,
//!            tumble(ts, size)['end'] AS window_end,
//!            window_time(tumble(ts, size)) AS window_time FROM t)
//! ```
//!
//! The window function carries the descriptor column, which the translator checks is
//! the relation's event time. `GROUP BY window_start, window_end` then groups by the
//! window (a window aggregate, final when the window closes), and a join on both
//! sides' `window_start`/`window_end` is a window join (docs/sql.md).

use crate::error::{Result, SqlError};
use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, TableFactor, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;
use std::ops::ControlFlow;

/// Window table-valued functions Flink has.
pub const WINDOW_TVFS: [&str; 4] = ["TUMBLE", "HOP", "CUMULATE", "SESSION"];

/// Rewrites every window TVF in `node` (a query) into its derived table.
///
/// # Errors
/// A TVF riffle does not run (SESSION), or one written with the wrong
/// arguments, named with what to write.
pub fn rewrite_window_tvfs<N: VisitMut>(node: &mut N) -> Result<()> {
    struct Rewriter(Option<SqlError>);
    impl VisitorMut for Rewriter {
        type Break = ();
        fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
            let TableFactor::TableFunction { expr, alias } = factor else {
                return ControlFlow::Continue(());
            };
            match derived_table(expr) {
                Ok(None) => ControlFlow::Continue(()),
                Ok(Some(subquery)) => {
                    *factor = TableFactor::Derived {
                        lateral: false,
                        subquery: Box::new(subquery),
                        alias: alias.take(),
                        sample: None,
                    };
                    ControlFlow::Continue(())
                }
                Err(e) => {
                    self.0 = Some(e);
                    ControlFlow::Break(())
                }
            }
        }
    }
    let mut rewriter = Rewriter(None);
    let _ = node.visit(&mut rewriter);
    match rewriter.0 {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The derived table of a window TVF call, or `None` when `expr` is not one.
fn derived_table(expr: &Expr) -> Result<Option<datafusion::sql::sqlparser::ast::Query>> {
    let Expr::Function(f) = expr else {
        return Ok(None);
    };
    let name = f.name.to_string().to_uppercase();
    if !WINDOW_TVFS.contains(&name.as_str()) {
        return Ok(None);
    }
    let usage = match name.as_str() {
        "TUMBLE" => "TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND))",
        "HOP" => "TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND))  -- slide, then size",
        "CUMULATE" => "TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND))  -- step, then max size",
        _ => {
            return Err(SqlError::unsupported(
                format!("the window table-valued function {name}"),
                "use TUMBLE, HOP or CUMULATE, or the group-window function session(INTERVAL …) in GROUP BY for sessions",
            ))
        }
    };
    let wrong = |why: &str| SqlError::Plan {
        at: None,
        message: format!("{expr}: {why}"),
        hint: Some(format!("write {usage}")),
    };
    let FunctionArguments::List(list) = &f.args else {
        return Err(wrong("needs arguments"));
    };
    let args: Vec<&Expr> = list
        .args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e),
            _ => Err(wrong("takes positional arguments")),
        })
        .collect::<Result<_>>()?;
    let intervals = crate::windows::interval_count(&name.to_lowercase());
    // Flink's optional last argument: windows start `offset` after the multiples of
    // their size since the epoch; riffle takes it for TUMBLE.
    if args.len() == 3 + intervals && name != "TUMBLE" {
        return Err(SqlError::unsupported(
            format!("{name} with an offset ({})", args[2 + intervals]),
            "riffle takes an offset for TUMBLE; hopping and cumulating windows start at multiples of their slide or step since 1970-01-01 00:00 UTC: drop the offset argument",
        ));
    }
    if !(2 + intervals..=2 + intervals + usize::from(name == "TUMBLE")).contains(&args.len()) {
        return Err(wrong(&format!(
            "takes a table, a DESCRIPTOR and {intervals} interval(s)"
        )));
    }
    let table = match args[0] {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => args[0].to_string(),
        _ => return Err(wrong("its first argument is `TABLE name`")),
    };
    let descriptor = match args[1] {
        Expr::Function(d) if d.name.to_string().eq_ignore_ascii_case("DESCRIPTOR") => {
            match &d.args {
                FunctionArguments::List(l) if l.args.len() == 1 => l.args[0].to_string(),
                _ => return Err(wrong("DESCRIPTOR names one time column")),
            }
        }
        _ => return Err(wrong("its second argument is DESCRIPTOR(time column)")),
    };
    let sizes: Vec<String> = args[2..].iter().map(ToString::to_string).collect();
    let call = format!(
        "{}({descriptor}, {})",
        name.to_lowercase(),
        sizes.join(", ")
    );
    let text = format!(
        "SELECT *, {call}['start'] AS window_start, {call}['end'] AS window_end, window_time({call}) AS window_time FROM {table}"
    );
    let query = Parser::new(&GenericDialect {})
        .try_with_sql(&text)
        .and_then(|mut p| p.parse_query())
        .map_err(|e| SqlError::plan(format!("rewriting {expr}: {e}")))?;
    Ok(Some(*query))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> Result<String> {
        let mut script = crate::script::parse(sql)?;
        rewrite_window_tvfs(&mut script.statements)?;
        Ok(script.statements[0].to_string())
    }

    #[test]
    fn a_tumble_tvf_is_its_table_with_window_columns() {
        let text = rewritten(
            "SELECT window_start, count(*) FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND)) GROUP BY window_start, window_end",
        )
        .unwrap();
        assert_eq!(
            text,
            "SELECT window_start, count(*) FROM (SELECT *, tumble(`dateTime`, INTERVAL '10' SECOND)['start'] AS window_start, tumble(`dateTime`, INTERVAL '10' SECOND)['end'] AS window_end, window_time(tumble(`dateTime`, INTERVAL '10' SECOND)) AS window_time FROM bid) GROUP BY window_start, window_end"
        );
    }

    #[test]
    fn hop_keeps_slide_then_size_and_the_alias() {
        let text = rewritten(
            "SELECT * FROM TABLE(HOP(TABLE bid, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND)) AS h",
        )
        .unwrap();
        assert!(
            text.contains("hop(ts, INTERVAL '2' SECOND, INTERVAL '10' SECOND)['start']"),
            "{text}"
        );
        assert!(text.ends_with("FROM bid) AS h"), "{text}");
    }

    #[test]
    fn cumulate_keeps_step_then_max() {
        let text = rewritten(
            "SELECT * FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND))",
        )
        .unwrap();
        assert!(
            text.contains("cumulate(ts, INTERVAL '2' SECOND, INTERVAL '10' SECOND)['end']"),
            "{text}"
        );
    }

    #[test]
    fn session_and_wrong_arguments_are_refused_by_name() {
        let e = rewritten(
            "SELECT * FROM TABLE(SESSION(TABLE bid, DESCRIPTOR(ts), INTERVAL '2' SECOND))",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("SESSION is not supported"), "{e}");
        let e = rewritten("SELECT * FROM TABLE(TUMBLE(TABLE bid, INTERVAL '2' SECOND))")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("takes a table, a DESCRIPTOR and 1 interval(s)"),
            "{e}"
        );
    }
}
