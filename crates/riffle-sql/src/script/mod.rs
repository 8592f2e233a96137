//! Turns a pipeline file into parsed statements.
//!
//! The file is tokenized once, then two Flink spellings the parser does not know are
//! rewritten on the tokens, so every statement keeps its original line and column:
//! `WATERMARK FOR col AS expr` inside `CREATE TABLE (…)` and `PARTITIONED BY (…)` after
//! it are lifted out (and returned beside the statements, `clauses`), and quoted option
//! keys `WITH ('connector' = …)` become quoted identifiers.

mod clauses;
mod processing_time;

use clauses::{in_window_tvf, java_function, lookup_clause, watermark_clause};
pub use clauses::{LookupClause, WatermarkClause};
use processing_time::{proctime_columns, windows_on};

use crate::error::{Location, Result, SqlError};
use crate::partition_clause::{partition_clause, PartitionClause};
use datafusion::sql::sqlparser::ast::Statement;
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{
    Token, TokenWithSpan, Tokenizer, TokenizerError, Whitespace, Word,
};

/// The statements of a file, and the clauses lifted out of them.
#[derive(Debug)]
pub struct Script {
    /// Statements in file order.
    pub statements: Vec<Statement>,
    /// Watermark clauses by table.
    pub watermarks: Vec<WatermarkClause>,
    /// Lookup joins' tables.
    pub lookups: Vec<LookupClause>,
    /// `PARTITIONED BY` clauses by table.
    pub partitions: Vec<PartitionClause>,
    /// Whether a window runs on a `PROCTIME()` column: then every source is read in
    /// processing time.
    pub processing_time: bool,
}

/// Parses a pipeline file.
///
/// # Errors
/// Tokenizer and parser errors, with line and column.
pub fn parse(text: &str) -> Result<Script> {
    let dialect = GenericDialect {};
    let tokens = Tokenizer::new(&dialect, text)
        .tokenize_with_location()
        .map_err(tokenizer_error)?;
    refuse_hints(&tokens)?;
    let proctime = proctime_columns(&tokens);
    let processing_time = windows_on(&tokens, &proctime);
    let (tokens, watermarks, lookups, partitions) = rewrite(tokens, &proctime)?;
    let statements = Parser::new(&dialect)
        .with_tokens_with_locations(tokens)
        .parse_statements()
        .map_err(parser_error)?;
    Ok(Script {
        statements,
        watermarks,
        lookups,
        partitions,
        processing_time,
    })
}

/// Refuses Flink's SQL hints (`/*+ OPTIONS(…) */`, `/*+ STATE_TTL(…) */`): the parser
/// takes them for comments, and an ignored `OPTIONS` hint would read another table than
/// the one written.
fn refuse_hints(tokens: &[TokenWithSpan]) -> Result<()> {
    let hint = tokens.iter().find(|t| {
        matches!(&t.token, Token::Whitespace(Whitespace::MultiLineComment(body)) if body.starts_with('+'))
    });
    match hint {
        Some(t) => Err(SqlError::Plan {
            at: Some(location(t)),
            message: format!("the SQL hint `{}` is not read by riffle", t.token),
            hint: Some("set a table option in its WITH (…) clause (or a copy of the table with other options); riffle keeps no state TTL and takes no join hints: drop the hint".into()),
        }),
        None => Ok(()),
    }
}

/// An identifier as riffle SQL resolves it: as written, quoted or not, as in Flink SQL
/// (an unquoted `itemName` is the JSON key `itemName`; lower-casing it made every value
/// NULL). The planner's session is configured the same way.
pub fn normalize(word: &str, _quoted: bool) -> String {
    word.to_string()
}

fn is_word(t: &Token, name: &str) -> bool {
    matches!(t, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(name))
}

fn location(t: &TokenWithSpan) -> Location {
    Location {
        line: t.span.start.line,
        column: t.span.start.column,
    }
}

/// Lifts out watermark and lookup clauses and unquotes option keys; `proctime` names
/// the columns given to `PROCTIME()` (a lookup's `AS OF` must be one).
#[allow(clippy::type_complexity)]
fn rewrite(
    tokens: Vec<TokenWithSpan>,
    proctime: &[String],
) -> Result<(
    Vec<TokenWithSpan>,
    Vec<WatermarkClause>,
    Vec<LookupClause>,
    Vec<PartitionClause>,
)> {
    let mut out: Vec<TokenWithSpan> = Vec::with_capacity(tokens.len());
    let mut watermarks = Vec::new();
    let mut lookups = Vec::new();
    let mut partitions = Vec::new();
    // Per statement: its leading words, the table name of a CREATE TABLE, paren depth,
    // and whether we are inside its WITH (…) list.
    let mut leading: Vec<String> = Vec::new();
    let mut table: Option<String> = None;
    let mut depth = 0usize;
    let mut in_options = false;
    let mut i = 0;
    let significant = |from: usize| {
        tokens[from..]
            .iter()
            .position(|t| !matches!(t.token, Token::Whitespace(_)))
            .map(|p| from + p)
    };
    while i < tokens.len() {
        let t = &tokens[i];
        match &t.token {
            Token::Whitespace(_) => {}
            Token::SemiColon if depth == 0 => {
                leading.clear();
                table = None;
                in_options = false;
            }
            Token::LParen => depth += 1,
            Token::RParen => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    in_options = false;
                }
            }
            Token::Word(w) if depth == 0 && leading.len() < 8 => {
                java_function(&leading, w, &tokens, i)?;
                let creating = leading.first().is_some_and(|l| l == "CREATE")
                    && leading.iter().any(|l| l == "TABLE");
                if creating
                    && table.is_none()
                    && !["IF", "NOT", "EXISTS"].contains(&w.value.to_uppercase().as_str())
                {
                    table = Some(normalize(&w.value, w.quote_style.is_some()));
                }
                if table.is_some() && is_word(&t.token, "WITH") {
                    in_options = true;
                }
                leading.push(w.value.to_uppercase());
            }
            _ => {}
        }
        let in_table = table.is_some();
        // WATERMARK FOR … at depth 1 of a CREATE TABLE: lift it out.
        if in_table && depth == 1 && !in_options && is_word(&t.token, "WATERMARK") {
            if let Some(next) = significant(i + 1) {
                if is_word(&tokens[next].token, "FOR") {
                    let (clause, end) =
                        watermark_clause(&tokens, i, table.clone().unwrap_or_default())?;
                    watermarks.push(clause);
                    // Drop the comma before the clause, or the one after it.
                    let before = out
                        .iter()
                        .rposition(|t| !matches!(t.token, Token::Whitespace(_)));
                    match before {
                        Some(b) if out[b].token == Token::Comma => {
                            out.truncate(b);
                            i = end;
                        }
                        _ => {
                            i = match significant(end) {
                                Some(c) if tokens[c].token == Token::Comma => c + 1,
                                _ => end,
                            };
                        }
                    }
                    continue;
                }
            }
        }
        // PARTITIONED BY (…) after a CREATE TABLE's columns: lift it out.
        if in_table && depth == 0 && !in_options && is_word(&t.token, "PARTITIONED") {
            let (clause, end) =
                partition_clause(&tokens, i, table.clone().unwrap_or_default(), location(t))?;
            partitions.push(clause);
            i = end;
            continue;
        }
        // 'key' = … inside WITH (…): the key becomes an identifier.
        if in_options && depth == 1 {
            if let Token::SingleQuotedString(key) = &t.token {
                if significant(i + 1).is_some_and(|n| tokens[n].token == Token::Eq) {
                    out.push(TokenWithSpan {
                        token: Token::Word(Word {
                            value: key.clone(),
                            quote_style: Some('"'),
                            keyword: Keyword::NoKeyword,
                        }),
                        span: t.span,
                    });
                    i += 1;
                    continue;
                }
            }
        }
        // A column named `key` (Nexmark q13's `side_input`): the parser would take the
        // word for the start of a `KEY (…)` constraint, so it becomes an identifier.
        if in_table && depth == 1 && !in_options && is_word(&t.token, "KEY") {
            let after_list_start = out
                .iter()
                .rev()
                .find(|t| !matches!(t.token, Token::Whitespace(_)))
                .is_some_and(|t| matches!(t.token, Token::LParen | Token::Comma));
            let typed =
                significant(i + 1).is_some_and(|n| matches!(tokens[n].token, Token::Word(_)));
            if after_list_start && typed {
                out.push(TokenWithSpan {
                    token: Token::Word(Word {
                        value: "key".into(),
                        quote_style: Some('"'),
                        keyword: Keyword::NoKeyword,
                    }),
                    span: t.span,
                });
                i += 1;
                continue;
            }
        }
        // `… JOIN dim FOR SYSTEM_TIME AS OF t.proc_time`: a lookup join of `dim`.
        if is_word(&t.token, "FOR")
            && significant(i + 1).is_some_and(|n| is_word(&tokens[n].token, "SYSTEM_TIME"))
        {
            let (clause, end) = lookup_clause(&tokens, &out, i, proctime)?;
            lookups.push(clause);
            i = end;
            continue;
        }
        // `TABLE(TUMBLE(TABLE t, …))`: the inner `TABLE` goes, so the call parses as a
        // table function over the relation `t` (`tvf.rs` rewrites it).
        if is_word(&t.token, "TABLE") && in_window_tvf(&out) {
            i += 1;
            continue;
        }
        out.push(t.clone());
        i += 1;
    }
    Ok((out, watermarks, lookups, partitions))
}

fn tokenizer_error(e: TokenizerError) -> SqlError {
    SqlError::Syntax {
        at: Location {
            line: e.location.line,
            column: e.location.column,
        },
        message: e.message,
    }
}

/// sqlparser puts the position at the end of its message: "… at Line: 3, Column: 7".
fn parser_error(e: ParserError) -> SqlError {
    let text = match e {
        ParserError::TokenizerError(m) | ParserError::ParserError(m) => m,
        ParserError::RecursionLimitExceeded => "the statement nests too deeply".into(),
    };
    let number = |key: &str| {
        text.rfind(key).and_then(|p| {
            text[p + key.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse::<u64>()
                .ok()
        })
    };
    let at = Location {
        line: number("Line: ").unwrap_or(0),
        column: number("Column: ").unwrap_or(0),
    };
    let message = match text.rfind(" at Line: ") {
        Some(p) => text[..p].to_string(),
        None => text,
    };
    SqlError::Syntax { at, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_hints_are_refused_where_they_stand_and_comments_are_not() {
        let e = parse("INSERT INTO out SELECT auction FROM bid /*+ OPTIONS('scan.startup.mode' = 'latest') */;")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("OPTIONS") && e.contains("line 1, column 41"),
            "{e}"
        );
        let e = parse("INSERT INTO out\nSELECT /*+ STATE_TTL('bid' = '1d') */ auction FROM bid;")
            .unwrap_err()
            .to_string();
        assert!(e.contains("STATE_TTL") && e.contains("line 2"), "{e}");
        parse("/* a comment */ INSERT INTO out SELECT auction FROM bid; -- and +this").unwrap();
    }

    #[test]
    fn watermark_clauses_are_lifted_out_and_option_keys_unquoted() {
        let script = parse(
            "CREATE TABLE bid (auction BIGINT, date_time TIMESTAMP,\n  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND\n) WITH ('connector' = 'nexmark', event_type = 'bid');\nCREATE TABLE out WITH ('connector' = 'blackhole');",
        )
        .unwrap();
        assert_eq!(script.statements.len(), 2);
        assert_eq!(script.watermarks.len(), 1);
        let w = &script.watermarks[0];
        assert_eq!((w.table.as_str(), w.column.as_str()), ("bid", "date_time"));
        assert_eq!(w.at, Location { line: 2, column: 3 });
        assert_eq!(w.expr.to_string(), "date_time - INTERVAL '4' SECOND");
        let text = script.statements[0].to_string();
        assert!(text.contains("\"connector\" = 'nexmark'"), "{text}");
        assert!(!text.contains("WATERMARK"), "{text}");
    }

    #[test]
    fn a_lookup_clause_names_its_table_and_is_dropped_from_the_query() {
        let script = parse(
            "INSERT INTO out SELECT b.auction, s.v FROM (SELECT *, PROCTIME() AS p_time FROM bid) b\nJOIN side FOR SYSTEM_TIME AS OF b.p_time AS s ON b.auction = s.k;",
        )
        .unwrap();
        assert_eq!(script.lookups.len(), 1);
        let l = &script.lookups[0];
        assert_eq!((l.table.as_str(), l.as_of.as_str()), ("side", "p_time"));
        assert_eq!(
            l.at,
            Location {
                line: 2,
                column: 11
            }
        );
        let text = script.statements[0].to_string();
        assert!(text.contains("JOIN side AS s ON"), "{text}");
    }

    #[test]
    fn a_window_on_a_proctime_column_puts_the_script_in_processing_time() {
        let view = "CREATE VIEW b AS SELECT *, PROCTIME() AS p_time FROM bid;\n";
        let on = |window: &str| {
            parse(&format!(
                "{view}INSERT INTO out SELECT count(*) FROM {window};"
            ))
            .unwrap()
            .processing_time
        };
        assert!(on("TABLE(TUMBLE(TABLE b, DESCRIPTOR(p_time), INTERVAL '10' SECOND)) GROUP BY window_start"));
        assert!(on("b GROUP BY TUMBLE(p_time, INTERVAL '10' SECOND)"));
        assert!(!on("TABLE(TUMBLE(TABLE b, DESCRIPTOR(date_time), INTERVAL '10' SECOND)) GROUP BY window_start"));
        // PROCTIME() only as a lookup's AS OF column: event time stays.
        assert!(!on("b"));
    }

    #[test]
    fn a_lookup_as_of_event_time_is_refused_as_a_temporal_join() {
        let err = parse(
            "INSERT INTO out SELECT b.auction FROM bid b JOIN side FOR SYSTEM_TIME AS OF b.date_time AS s ON b.auction = s.k;",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("`date_time` is not a PROCTIME() column"),
            "{err}"
        );
        assert!(err.contains("versioned table"), "{err}");
    }

    #[test]
    fn syntax_errors_carry_line_and_column() {
        let err = parse("CREATE TABLE t (a BIGINT);\nINSERT INTO t SELEC a FROM t;").unwrap_err();
        match err {
            SqlError::Syntax { at, .. } => assert_eq!(at.line, 2),
            other => panic!("{other}"),
        }
    }
}
