//! Flink functions whose DataFusion namesake gives another value for some arguments,
//! rewritten into DataFusion expressions that give Flink's (docs/from-flink.md lists
//! each difference). Texts only: [`super::flink_spelling`] parses them.

use datafusion::sql::sqlparser::ast::Expr;

/// `call` unless one of `args` is NULL, then NULL: Flink's `CONCAT`, `GREATEST` and
/// `LEAST` are NULL when any argument is; DataFusion's skip NULL arguments.
pub(super) fn null_if_any(args: &[&Expr], call: &str) -> String {
    let any_null = args
        .iter()
        .map(|a| format!("({a}) IS NULL"))
        .collect::<Vec<_>>()
        .join(" OR ");
    format!("(CASE WHEN {any_null} THEN NULL ELSE {call} END)")
}

/// `name(args…)` as text.
pub(super) fn call(name: &str, args: &[&Expr]) -> String {
    let joined = args
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    format!("{name}({joined})")
}

/// Flink's `LEFT(s, n)` / `RIGHT(s, n)`: `''` for a negative `n` (DataFusion's, like
/// PostgreSQL's, drops `-n` characters from the other end).
pub(super) fn left_or_right(name: &str, s: &Expr, n: &Expr) -> String {
    format!("(CASE WHEN ({n}) < 0 THEN '' ELSE {name}({s}, {n}) END)")
}

/// Flink's `SUBSTRING(s, pos [, len])` (also `SUBSTR`, `SUBSTRING(s FROM pos FOR len)`):
/// a position of 0 is the first character and a negative one counts from the end
/// (`-2` is the last two), a position before the start is `''`, and a negative length
/// is NULL. DataFusion's counts position 0 as one before the first character (so
/// `SUBSTRING('abc', 0, 2)` is `'a'`, Flink's `'ab'`) and reads a negative position as
/// before the start.
pub(super) fn substring(s: &Expr, pos: &Expr, len: Option<&Expr>) -> String {
    let negative_length = len.map_or(String::new(), |l| format!("WHEN ({l}) < 0 THEN NULL "));
    let from = format!(
        "CASE WHEN ({pos}) > 0 THEN ({pos}) WHEN ({pos}) < 0 THEN char_length({s}) + ({pos}) + 1 ELSE 1 END"
    );
    let taken = match len {
        Some(l) => format!("substr({s}, {from}, {l})"),
        None => format!("substr({s}, {from})"),
    };
    format!(
        "(CASE WHEN ({pos}) IS NULL THEN NULL {negative_length}WHEN char_length({s}) + ({pos}) < 0 THEN '' ELSE {taken} END)"
    )
}

/// Flink's `FROM_UNIXTIME(seconds [, pattern])`: the time as text in a Java pattern,
/// `yyyy-MM-dd HH:mm:ss` by default (DataFusion's `from_unixtime` is a timestamp).
pub(super) fn from_unixtime(seconds: &Expr, pattern: Option<&Expr>) -> String {
    let pattern = pattern.map_or("'yyyy-MM-dd HH:mm:ss'".to_string(), ToString::to_string);
    format!("DATE_FORMAT(to_timestamp_seconds({seconds}), {pattern})")
}

/// Flink's `UNIX_TIMESTAMP(s [, pattern])`: seconds since the epoch of a time written
/// in a Java pattern (`yyyy-MM-dd HH:mm:ss` by default, UTC), truncated toward zero as
/// Java divides; `Long.MIN_VALUE` when `s` does not match, as Flink returns.
pub(super) fn unix_timestamp(s: &Expr, pattern: Option<&Expr>) -> String {
    let pattern = pattern.map_or("'yyyy-MM-dd HH:mm:ss'".to_string(), ToString::to_string);
    let parsed = format!("TO_TIMESTAMP({s}, {pattern})");
    format!(
        "(CASE WHEN ({s}) IS NULL THEN NULL WHEN {parsed} IS NULL THEN (-9223372036854775807 - 1) ELSE CAST({parsed} AS BIGINT) / 1000 END)"
    )
}

/// Flink's `TO_DATE(s [, pattern])`: the date of a text in a Java pattern (`yyyy-MM-dd`
/// by default); NULL when it does not match. (DataFusion's `to_date` takes strftime
/// patterns.)
pub(super) fn to_date(s: &Expr, pattern: Option<&Expr>) -> String {
    let pattern = pattern.map_or("'yyyy-MM-dd'".to_string(), ToString::to_string);
    format!("CAST(TO_TIMESTAMP({s}, {pattern}) AS DATE)")
}

/// Flink's `TO_TIMESTAMP_LTZ(n, precision)`: `n` seconds (precision 0) or milliseconds
/// (precision 3) since the epoch; `None` for another precision.
pub(super) fn to_timestamp_ltz(n: &Expr, precision: &Expr) -> Option<String> {
    match precision.to_string().as_str() {
        "0" => Some(format!("to_timestamp_seconds({n})")),
        "3" => Some(format!("to_timestamp_millis({n})")),
        _ => None,
    }
}
