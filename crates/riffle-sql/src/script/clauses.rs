//! The clauses `parse` lifts out of the tokens before the parser sees them: a table's
//! `WATERMARK FOR`, a join's `FOR SYSTEM_TIME AS OF`; and a Java `CREATE FUNCTION`,
//! which is refused.

use super::{is_word, location, normalize, parser_error};
use crate::error::{Location, Result, SqlError};
use datafusion::sql::sqlparser::ast::Expr;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Word};

/// A `WATERMARK FOR column AS expression` clause of a table.
#[derive(Debug, Clone)]
pub struct WatermarkClause {
    /// The table it was declared in (normalized name).
    pub table: String,
    /// The event-time column.
    pub column: String,
    /// The watermark expression, e.g. `date_time - INTERVAL '4' SECOND`.
    pub expr: Expr,
    /// Where the clause starts.
    pub at: Location,
}

/// A `JOIN table FOR SYSTEM_TIME AS OF column` clause: `table` is read as a lookup
/// table (the clause itself is dropped; the join is planned as a lookup join).
#[derive(Debug, Clone)]
pub struct LookupClause {
    /// The table joined.
    pub table: String,
    /// The processing-time column the table is read as of.
    pub as_of: String,
    /// Where the clause starts.
    pub at: Location,
}

/// Parses `WATERMARK FOR col AS expr` starting at `start`; returns it and the index of
/// the first token after it (the `,` or `)` that ends it).
pub(super) fn watermark_clause(
    tokens: &[TokenWithSpan],
    start: usize,
    table: String,
) -> Result<(WatermarkClause, usize)> {
    let mut depth = 0usize;
    let mut end = start;
    while end < tokens.len() {
        match tokens[end].token {
            Token::LParen => depth += 1,
            Token::RParen if depth == 0 => break,
            Token::RParen => depth -= 1,
            Token::Comma if depth == 0 => break,
            _ => {}
        }
        end += 1;
    }
    let at = location(&tokens[start]);
    let dialect = GenericDialect {};
    // The clause after `WATERMARK FOR`.
    let body = tokens[start..end]
        .iter()
        .enumerate()
        .filter(|(_, t)| is_word(&t.token, "FOR"))
        .map(|(k, _)| start + k + 1)
        .next()
        .unwrap_or(end);
    let mut clause = tokens[body..end].to_vec();
    clause.push(TokenWithSpan::wrap(Token::EOF));
    let mut parser = Parser::new(&dialect).with_tokens_with_locations(clause);
    let ident = parser.parse_identifier().map_err(parser_error)?;
    let column = normalize(&ident.value, ident.quote_style.is_some());
    parser
        .expect_keyword(Keyword::AS)
        .map_err(|_| SqlError::Syntax {
            at,
            message: format!("expected `WATERMARK FOR {column} AS {column} - INTERVAL '4' SECOND`"),
        })?;
    let expr = parser.parse_expr().map_err(parser_error)?;
    Ok((
        WatermarkClause {
            table,
            column,
            expr,
            at,
        },
        end,
    ))
}

/// The lookup clause starting at `FOR` (token `at`) after the table name that ends
/// `out`, and the index of the first token after it.
pub(super) fn lookup_clause(
    tokens: &[TokenWithSpan],
    out: &[TokenWithSpan],
    at: usize,
    proctime: &[String],
) -> Result<(LookupClause, usize)> {
    let here = location(&tokens[at]);
    let refuse = |message: String, hint: &str| SqlError::Plan {
        at: Some(here),
        message,
        hint: Some(hint.into()),
    };
    let table = match out
        .iter()
        .rev()
        .find(|t| !matches!(t.token, Token::Whitespace(_)))
        .map(|t| &t.token)
    {
        Some(Token::Word(w)) => normalize(&w.value, w.quote_style.is_some()),
        _ => {
            return Err(refuse(
                "FOR SYSTEM_TIME AS OF must follow a table name".into(),
                "write JOIN dim FOR SYSTEM_TIME AS OF s.proc_time AS d ON …",
            ))
        }
    };
    // FOR SYSTEM_TIME AS OF, then a column, possibly qualified.
    let mut i = at;
    let mut seen = Vec::new();
    while seen.len() < 4 {
        if !matches!(tokens[i].token, Token::Whitespace(_)) {
            seen.push(tokens[i].token.to_string().to_uppercase());
        }
        i += 1;
        if i == tokens.len() {
            break;
        }
    }
    if seen != ["FOR", "SYSTEM_TIME", "AS", "OF"] {
        return Err(refuse(
            format!("`{}` is not FOR SYSTEM_TIME AS OF", seen.join(" ")),
            "write JOIN dim FOR SYSTEM_TIME AS OF s.proc_time AS d ON …",
        ));
    }
    let mut as_of = None;
    let mut expect_name = true;
    while i < tokens.len() {
        match &tokens[i].token {
            Token::Whitespace(_) => {}
            Token::Word(w) if expect_name => {
                as_of = Some(normalize(&w.value, w.quote_style.is_some()));
                expect_name = false;
            }
            Token::Period if !expect_name => expect_name = true,
            _ => break,
        }
        i += 1;
    }
    let Some(as_of) = as_of.filter(|_| !expect_name) else {
        return Err(refuse(
            "FOR SYSTEM_TIME AS OF takes a column".into(),
            "write JOIN dim FOR SYSTEM_TIME AS OF s.proc_time AS d ON …, with PROCTIME() AS proc_time in the stream's select list",
        ));
    };
    if !proctime.contains(&as_of) {
        return Err(refuse(
            format!("FOR SYSTEM_TIME AS OF `{as_of}`: riffle reads a table as of processing time only, and `{as_of}` is not a PROCTIME() column (a temporal join against a versioned table, as of event time, is not supported)"),
            "add PROCTIME() AS proc_time to the stream's select list and write FOR SYSTEM_TIME AS OF s.proc_time",
        ));
    }
    Ok((
        LookupClause {
            table,
            as_of,
            at: here,
        },
        i,
    ))
}

/// Refuses Flink's `CREATE [TEMPORARY] [SYSTEM] FUNCTION name AS 'java.Class'` at the
/// name `word` (token `at`), whose statement began with the words `leading`.
pub(super) fn java_function(
    leading: &[String],
    word: &Word,
    tokens: &[TokenWithSpan],
    at: usize,
) -> Result<()> {
    let creating = leading.first().is_some_and(|l| l == "CREATE")
        && leading
            .last()
            .is_some_and(|l| l == "FUNCTION" || l == "EXISTS");
    if !creating || ["IF", "NOT", "EXISTS"].contains(&word.value.to_uppercase().as_str()) {
        return Ok(());
    }
    let next = tokens[at + 1..]
        .iter()
        .find(|t| !matches!(t.token, Token::Whitespace(_)));
    if !next.is_some_and(|t| is_word(&t.token, "AS")) {
        return Ok(());
    }
    Err(SqlError::Plan {
        at: Some(location(&tokens[at])),
        message: format!(
            "CREATE FUNCTION {} AS '…' names a Java (or Scala, Python) class, and riffle runs no JVM",
            word.value
        ),
        hint: Some(
            "declare it as a SQL expression: CREATE FUNCTION name(a VARCHAR, …) RETURNS BIGINT AS '<expression of a, …>', or write it in Rust (docs/rust-api.md)"
                .into(),
        ),
    })
}

/// Whether the tokens so far end with `TABLE ( TUMBLE|HOP|CUMULATE|SESSION (`.
pub(super) fn in_window_tvf(out: &[TokenWithSpan]) -> bool {
    let mut significant = out
        .iter()
        .rev()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .map(|t| &t.token);
    let (Some(open), Some(function), Some(outer_open), Some(table)) = (
        significant.next(),
        significant.next(),
        significant.next(),
        significant.next(),
    ) else {
        return false;
    };
    *open == Token::LParen
        && crate::tvf::WINDOW_TVFS
            .iter()
            .any(|name| is_word(function, name))
        && *outer_open == Token::LParen
        && is_word(table, "TABLE")
}
