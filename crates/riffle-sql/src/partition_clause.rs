//! `PARTITIONED BY (…)` of a `CREATE TABLE`, read from the tokens: Flink's form (column
//! names, `PARTITIONED BY (channel)`) and the transform calls of Iceberg's DDL in Spark
//! (`PARTITIONED BY (days(date_time), bucket(16, auction))`), which the SQL parser does
//! not take. The clause is lifted out of the statement (as `WATERMARK FOR` is) and kept
//! beside it; a sink that cannot write partitions refuses it.

use crate::error::{Location, Result, SqlError};
use crate::script::normalize;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

/// One term of a `PARTITIONED BY` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionTerm {
    /// The column partitioned by.
    pub column: String,
    /// The transform called on it, lower-case (`days`, `bucket`, …); `None` for the
    /// column's value itself.
    pub function: Option<String>,
    /// The number argument of `bucket(n, col)` and `truncate(w, col)`.
    pub width: Option<u32>,
}

impl std::fmt::Display for PartitionTerm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.function, self.width) {
            (None, _) => write!(f, "{}", self.column),
            (Some(function), None) => write!(f, "{function}({})", self.column),
            (Some(function), Some(width)) => write!(f, "{function}({width}, {})", self.column),
        }
    }
}

/// The `PARTITIONED BY` clause of a table.
#[derive(Debug, Clone)]
pub struct PartitionClause {
    /// The table it was declared on (normalized name).
    pub table: String,
    /// Its terms, in order.
    pub terms: Vec<PartitionTerm>,
    /// Where the clause starts.
    pub at: Location,
}

/// Reads the clause whose `PARTITIONED` is token `start`; returns it and the index of
/// the first token after its closing parenthesis.
///
/// # Errors
/// A term that is neither `column`, `f(column)` nor `f(n, column)`.
pub fn partition_clause(
    tokens: &[TokenWithSpan],
    start: usize,
    table: String,
    at: Location,
) -> Result<(PartitionClause, usize)> {
    let bad = |found: &str| {
        SqlError::Syntax {
        at,
        message: format!(
            "PARTITIONED BY of `{table}`: expected columns or transforms such as (channel), (days(date_time), bucket(16, auction)); found {found}"
        ),
    }
    };
    // The significant tokens from `start`, with their indices.
    let significant: Vec<(usize, &Token)> = tokens[start..]
        .iter()
        .enumerate()
        .filter(|(_, t)| !matches!(t.token, Token::Whitespace(_)))
        .map(|(k, t)| (start + k, &t.token))
        .collect();
    let word = |k: usize| match significant.get(k) {
        Some((_, Token::Word(w))) => Some(normalize(&w.value, w.quote_style.is_some())),
        _ => None,
    };
    let token = |k: usize| significant.get(k).map(|(_, t)| *t);
    if !word(1).is_some_and(|w| w.eq_ignore_ascii_case("BY")) || token(2) != Some(&Token::LParen) {
        return Err(bad("no (…) list after PARTITIONED BY"));
    }
    let mut terms = Vec::new();
    let mut k = 3;
    loop {
        let Some(name) = word(k) else {
            return Err(bad(&format!(
                "`{}`",
                token(k).map(Token::to_string).unwrap_or_default()
            )));
        };
        if token(k + 1) == Some(&Token::LParen) {
            // f(column) or f(n, column)
            let (width, column_at) = match token(k + 2) {
                Some(Token::Number(n, _)) => {
                    let width = n.parse::<u32>().map_err(|_| bad(&format!("`{n}`")))?;
                    if token(k + 3) != Some(&Token::Comma) {
                        return Err(bad(&format!("`{name}({n}` without a column")));
                    }
                    (Some(width), k + 4)
                }
                _ => (None, k + 2),
            };
            let column =
                word(column_at).ok_or_else(|| bad(&format!("`{name}(` without a column")))?;
            if token(column_at + 1) != Some(&Token::RParen) {
                return Err(bad(&format!("`{name}({column}` not closed")));
            }
            terms.push(PartitionTerm {
                column,
                function: Some(name.to_lowercase()),
                width,
            });
            k = column_at + 2;
        } else {
            terms.push(PartitionTerm {
                column: name,
                function: None,
                width: None,
            });
            k += 1;
        }
        match token(k) {
            Some(Token::Comma) => k += 1,
            Some(Token::RParen) => break,
            other => {
                return Err(bad(&format!(
                    "`{}`",
                    other.map(Token::to_string).unwrap_or_default()
                )))
            }
        }
    }
    let end = significant[k].0 + 1;
    Ok((PartitionClause { table, terms, at }, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::tokenizer::Tokenizer;

    fn clause(text: &str) -> Result<(Vec<PartitionTerm>, String)> {
        let tokens = Tokenizer::new(&GenericDialect {}, text)
            .tokenize_with_location()
            .unwrap();
        let at = Location { line: 1, column: 1 };
        let (clause, end) = partition_clause(&tokens, 0, "t".into(), at)?;
        let rest: String = tokens[end..].iter().map(|t| t.token.to_string()).collect();
        Ok((clause.terms, rest))
    }

    #[test]
    fn columns_and_transform_calls_are_read_in_order() {
        let (terms, rest) =
            clause("PARTITIONED BY (channel, DAYS(date_time), bucket(16, auction)) WITH (…)")
                .unwrap();
        let shown: Vec<String> = terms.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["channel", "days(date_time)", "bucket(16, auction)"]);
        assert_eq!(terms[2].width, Some(16));
        assert_eq!(rest, " WITH (…)");
    }

    #[test]
    fn a_malformed_clause_is_a_syntax_error_naming_the_table() {
        for text in [
            "PARTITIONED BY channel",
            "PARTITIONED BY (bucket(16))",
            "PARTITIONED BY (bucket(x, auction))",
            "PARTITIONED BY (channel auction)",
            "PARTITIONED BY (days(date_time)",
        ] {
            let e = clause(text).unwrap_err().to_string();
            assert!(e.contains("PARTITIONED BY of `t`"), "{text}: {e}");
        }
    }
}
