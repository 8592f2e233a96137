//! Flink's built-in functions, with Flink's semantics where they differ from
//! DataFusion's functions of the same name (docs/from-flink.md lists each).
//!
//! Two kinds:
//! - **Spellings** (`MOD`, `HOUR`, `IF`, `CONCAT`, …) are rewritten on the parsed
//!   statement into the DataFusion expression that computes the same value, before
//!   DataFusion plans it ([`rewrite_flink_calls`]). DataFusion then types and runs them.
//! - **Kernels** (`DATE_FORMAT`, `TO_TIMESTAMP`, `SPLIT_INDEX`, `REGEXP_EXTRACT`,
//!   `REGEXP_REPLACE`, `PROCTIME`, `CONVERT_TZ`, `ROUND`, `TRUNCATE`, …)
//!   are scalar UDFs
//!   registered under Flink's names ([`flink_udfs`]).

mod avg;
mod ceil_floor;
mod convert_tz;
mod date_format;
mod java_text;
mod macros;
mod proctime;
mod regexp_extract;
mod regexp_replace;
mod round_truncate;
mod spellings;
mod split_index;
mod text_memo;
mod timestamp_units;
mod to_timestamp;

use crate::error::{Result, SqlError};
use datafusion::logical_expr::ScalarUDF;
use datafusion::sql::sqlparser::ast::{
    Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments, VisitMut,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;
use std::ops::ControlFlow;

pub use avg::avg_udaf;
pub use java_text::java_number_text_udf;
pub use macros::{define, expand_macros, SqlMacro};

/// The kernels, to register with the planner (they replace DataFusion's functions of
/// the same names, if any).
pub fn flink_udfs() -> Vec<ScalarUDF> {
    vec![
        date_format::date_format_udf(),
        split_index::split_index_udf(),
        regexp_extract::regexp_extract_udf(),
        regexp_replace::regexp_replace_udf(),
        proctime::proctime_udf(),
        to_timestamp::to_timestamp_udf(),
        java_text::java_number_text_udf(),
        ceil_floor::ceil_udf(),
        ceil_floor::floor_udf(),
        timestamp_units::timestampadd_udf(),
        timestamp_units::timestampdiff_udf(),
        convert_tz::convert_tz_udf(),
        round_truncate::round_udf(),
        round_truncate::truncate_udf(),
    ]
}

/// Date-time fields Flink extracts with a function of their name; each returns BIGINT.
const EXTRACT_FUNCTIONS: [(&str, &str); 8] = [
    ("year", "YEAR"),
    ("quarter", "QUARTER"),
    ("month", "MONTH"),
    ("week", "WEEK"),
    ("dayofmonth", "DAY"),
    ("hour", "HOUR"),
    ("minute", "MINUTE"),
    ("second", "SECOND"),
];

/// Rewrites Flink function spellings in `node` (a query or statement) into DataFusion
/// expressions with the same value.
///
/// # Errors
/// A Flink function called with the wrong number of arguments, named.
pub fn rewrite_flink_calls<N: VisitMut>(node: &mut N) -> Result<()> {
    replace_expressions(node, |expr| match flink_spelling(expr)? {
        Some(text) => parse_expr(&text).map(Some),
        None => Ok(None),
    })
}

/// Replaces, inside out, every expression of `node` that `replacement` gives a new one
/// for; stops at its first error.
fn replace_expressions<N: VisitMut>(
    node: &mut N,
    mut replacement: impl FnMut(&Expr) -> Result<Option<Expr>>,
) -> Result<()> {
    let mut failure = None;
    let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(node, |expr| {
        match replacement(expr) {
            Ok(Some(e)) => *expr = e,
            Ok(None) => {}
            Err(e) => {
                failure = Some(e);
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    });
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Whether an argument of type `t` is text (or an untyped NULL) for a text kernel.
fn is_text(t: &datafusion::arrow::datatypes::DataType) -> bool {
    use datafusion::arrow::datatypes::DataType;
    matches!(
        t,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
    )
}

/// The text of a string literal argument (a pattern), if it is one.
fn string_literal(value: Option<&datafusion::common::ScalarValue>) -> Option<&str> {
    use datafusion::common::ScalarValue;
    match value? {
        ScalarValue::Utf8(Some(p))
        | ScalarValue::LargeUtf8(Some(p))
        | ScalarValue::Utf8View(Some(p)) => Some(p),
        _ => None,
    }
}

/// The DataFusion text of a Flink call, or `None` when `expr` is not one.
fn flink_spelling(expr: &Expr) -> Result<Option<String>> {
    if let Expr::Substring {
        expr: s,
        substring_from: Some(pos),
        substring_for: len,
        ..
    } = expr
    {
        return Ok(Some(spellings::substring(s, pos, len.as_deref())));
    }
    let Expr::Function(f) = expr else {
        return Ok(None);
    };
    if f.over.is_some() || f.name.0.len() != 1 {
        return Ok(None);
    }
    let name = f.name.to_string().to_lowercase();
    let Some(args) = plain_args(f) else {
        return Ok(None);
    };
    let arity = |n: usize, usage: &str| -> Result<()> {
        if args.len() == n {
            Ok(())
        } else {
            Err(SqlError::Plan {
                at: None,
                message: format!(
                    "{} takes {n} argument(s), not {}",
                    name.to_uppercase(),
                    args.len()
                ),
                hint: Some(format!("write {usage}")),
            })
        }
    };
    // Flink's group-window auxiliaries: `SESSION_START(ts, gap)` is the start of the
    // window `SESSION(ts, gap)` in GROUP BY (riffle's `session(ts, gap)`).
    if let Some((window, part)) = group_window_auxiliary(&name) {
        let call = spellings::call(window, &args);
        return match part {
            "start" | "end" => Ok(Some(format!("{call}['{part}']"))),
            "rowtime" => Ok(Some(format!("window_time({call})"))),
            _ => Err(SqlError::unsupported(
                name.to_uppercase(),
                "riffle windows run on event time; use the _START, _END or _ROWTIME function",
            )),
        };
    }
    let text = match name.as_str() {
        "now" | "current_timestamp" | "localtimestamp" | "unix_timestamp" if args.is_empty() => {
            return Err(SqlError::unsupported(
                format!("{}() (processing time)", name.to_uppercase()),
                "riffle computes on event time, so a restore replays to the same result: use the table's WATERMARK FOR column (its event time) instead",
            ))
        }
        // Java's `%`: the sign follows the dividend, as DataFusion's.
        "mod" => {
            arity(2, "MOD(a, b)")?;
            format!("(({}) % ({}))", args[0], args[1])
        }
        "if" => {
            arity(3, "IF(condition, then, else)")?;
            format!(
                "(CASE WHEN {} THEN {} ELSE {} END)",
                args[0], args[1], args[2]
            )
        }
        // NULL when any argument is; DataFusion's skip NULLs.
        "concat" | "greatest" | "least" if !args.is_empty() => {
            spellings::null_if_any(&args, &spellings::call(&name, &args))
        }
        // Flink's one-argument LOG is the natural logarithm (DataFusion's is base 10).
        "log" if args.len() == 1 => format!("ln({})", args[0]),
        "left" | "right" => {
            arity(2, &format!("{}(string, length)", name.to_uppercase()))?;
            spellings::left_or_right(&name, args[0], args[1])
        }
        "substr" | "substring" => {
            if !(2..=3).contains(&args.len()) {
                arity(3, "SUBSTRING(string, position [, length])")?;
            }
            spellings::substring(args[0], args[1], args.get(2).copied())
        }
        "from_unixtime" => {
            if !(1..=2).contains(&args.len()) {
                arity(2, "FROM_UNIXTIME(seconds [, 'yyyy-MM-dd HH:mm:ss'])")?;
            }
            spellings::from_unixtime(args[0], args.get(1).copied())
        }
        "unix_timestamp" if !args.is_empty() => {
            if args.len() > 2 {
                arity(2, "UNIX_TIMESTAMP(text [, 'yyyy-MM-dd HH:mm:ss'])")?;
            }
            spellings::unix_timestamp(args[0], args.get(1).copied())
        }
        "to_date" => {
            if !(1..=2).contains(&args.len()) {
                arity(2, "TO_DATE(text [, 'yyyy-MM-dd'])")?;
            }
            spellings::to_date(args[0], args.get(1).copied())
        }
        "to_timestamp_ltz" => {
            arity(2, "TO_TIMESTAMP_LTZ(number, 3)  -- 0: seconds, 3: milliseconds")?;
            spellings::to_timestamp_ltz(args[0], args[1]).ok_or_else(|| SqlError::Plan {
                at: None,
                message: format!("TO_TIMESTAMP_LTZ precision `{}`", args[1]),
                hint: Some("write 0 (seconds) or 3 (milliseconds)".into()),
            })?
        }
        "timestampadd" | "timestampdiff" => {
            let usage = match name.as_str() {
                "timestampadd" => "TIMESTAMPADD(unit, n, timestamp)",
                _ => "TIMESTAMPDIFF(unit, timestamp1, timestamp2)",
            };
            arity(3, usage)?;
            let unit = args[0].to_string();
            if timestamp_units::Unit::parse(&unit).is_none() {
                return Err(SqlError::Plan {
                    at: None,
                    message: format!("{} has no unit `{unit}`", name.to_uppercase()),
                    hint: Some(format!("write {usage} with unit one of {}", timestamp_units::UNITS)),
                });
            }
            format!(
                "riffle_{name}('{}', {}, {})",
                unit.to_uppercase(),
                args[1],
                args[2]
            )
        }
        other => match EXTRACT_FUNCTIONS.iter().find(|(n, _)| *n == other) {
            Some((_, field)) => {
                arity(1, &format!("{}(timestamp)", other.to_uppercase()))?;
                format!("CAST(date_part('{field}', {}) AS BIGINT)", args[0])
            }
            None => return Ok(None),
        },
    };
    Ok(Some(text))
}

/// The window function and part of a group-window auxiliary such as `tumble_start`.
fn group_window_auxiliary(name: &str) -> Option<(&'static str, &str)> {
    let (window, part) = name.split_once('_')?;
    let window = ["tumble", "hop", "session"]
        .into_iter()
        .find(|w| *w == window)?;
    ["start", "end", "rowtime", "proctime"]
        .contains(&part)
        .then_some((window, part))
}

/// The positional arguments of a plain call (no DISTINCT, named arguments, FILTER or
/// ORDER BY), or `None`.
fn plain_args(f: &Function) -> Option<Vec<&Expr>> {
    if f.filter.is_some() || !f.within_group.is_empty() {
        return None;
    }
    let FunctionArguments::List(list) = &f.args else {
        return None;
    };
    if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
        return None;
    }
    list.args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e),
            _ => None,
        })
        .collect()
}

fn parse_expr(text: &str) -> Result<Expr> {
    Parser::new(&GenericDialect {})
        .try_with_sql(text)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| SqlError::plan(format!("rewriting `{text}`: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(sql: &str) -> String {
        let mut e = parse_expr(sql).unwrap();
        rewrite_flink_calls(&mut e).unwrap();
        e.to_string()
    }

    #[test]
    fn concat_ws_is_datafusions_and_gives_flinks_documented_value() {
        use datafusion::arrow::datatypes::{DataType, Field};
        use datafusion::common::ScalarValue;
        use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs};
        use std::sync::Arc;
        // Flink's documentation: CONCAT_WS('~', 'AA', NULL, 'BB', '', 'CC') = 'AA~BB~~CC'.
        let text =
            |s: Option<&str>| ColumnarValue::Scalar(ScalarValue::Utf8(s.map(str::to_string)));
        let args = vec![
            text(Some("~")),
            text(Some("AA")),
            text(None),
            text(Some("BB")),
            text(Some("")),
            text(Some("CC")),
        ];
        let arg_fields = (0..args.len())
            .map(|i| Arc::new(Field::new(format!("a{i}"), DataType::Utf8, true)))
            .collect();
        let out = datafusion::functions::string::concat_ws()
            .invoke_with_args(ScalarFunctionArgs {
                args,
                arg_fields,
                number_rows: 1,
                return_field: Arc::new(Field::new("r", DataType::Utf8, true)),
                config_options: Arc::new(datafusion::config::ConfigOptions::default()),
            })
            .unwrap();
        let ColumnarValue::Scalar(ScalarValue::Utf8(Some(v))) = out else {
            panic!("{out:?}")
        };
        assert_eq!(v, "AA~BB~~CC");
    }

    #[test]
    fn flink_spellings_become_datafusion_expressions() {
        assert_eq!(
            rewritten("MOD(auction, 123) = 0"),
            "((auction) % (123)) = 0"
        );
        assert_eq!(
            rewritten("HOUR(`dateTime`)"),
            "CAST(date_part('HOUR', `dateTime`) AS BIGINT)"
        );
        assert_eq!(
            rewritten("IF(a > 1, 'x', 'y')"),
            "(CASE WHEN a > 1 THEN 'x' ELSE 'y' END)"
        );
        // Nested calls are rewritten inside out.
        assert_eq!(
            rewritten("mod(minute(ts), 2)"),
            "((CAST(date_part('MINUTE', ts) AS BIGINT)) % (2))"
        );
    }

    #[test]
    fn group_window_auxiliaries_read_their_window() {
        assert_eq!(
            rewritten("SESSION_START(B.`dateTime`, INTERVAL '10' SECOND)"),
            "session(B.`dateTime`, INTERVAL '10' SECOND)['start']"
        );
        assert_eq!(
            rewritten("hop_end(ts, INTERVAL '2' SECOND, INTERVAL '10' SECOND)"),
            "hop(ts, INTERVAL '2' SECOND, INTERVAL '10' SECOND)['end']"
        );
        assert_eq!(
            rewritten("TUMBLE_ROWTIME(ts, INTERVAL '1' MINUTE)"),
            "window_time(tumble(ts, INTERVAL '1' MINUTE))"
        );
        let mut e = parse_expr("TUMBLE_PROCTIME(ts, INTERVAL '1' MINUTE)").unwrap();
        let err = rewrite_flink_calls(&mut e).unwrap_err().to_string();
        assert!(err.contains("TUMBLE_PROCTIME is not supported"), "{err}");
    }

    #[test]
    fn concat_is_null_when_any_argument_is() {
        assert_eq!(
            rewritten("CONCAT(a, 'b')"),
            "(CASE WHEN (a) IS NULL OR ('b') IS NULL THEN NULL ELSE concat(a, 'b') END)"
        );
    }

    #[test]
    fn wrong_argument_counts_are_named() {
        let mut e = parse_expr("MOD(a)").unwrap();
        let err = rewrite_flink_calls(&mut e).unwrap_err().to_string();
        assert!(err.contains("MOD takes 2 argument(s), not 1"), "{err}");
    }

    #[test]
    fn other_calls_are_left_alone() {
        assert_eq!(rewritten("upper(a)"), "upper(a)");
        assert_eq!(rewritten("count(DISTINCT a)"), "count(DISTINCT a)");
    }
}
