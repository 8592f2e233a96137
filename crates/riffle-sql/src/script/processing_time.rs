//! Processing time: which columns a script gives `PROCTIME()`, and whether a window
//! is laid over one (then every source is read in processing time).

use super::{is_word, normalize};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

/// Names given to `PROCTIME()` in a select list (`PROCTIME() AS p_time`).
pub(super) fn proctime_columns(tokens: &[TokenWithSpan]) -> Vec<String> {
    let words: Vec<&Token> = tokens
        .iter()
        .map(|t| &t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    let mut names = Vec::new();
    for (i, t) in words.iter().enumerate() {
        if !is_word(t, "PROCTIME") || words.get(i + 1) != Some(&&Token::LParen) {
            continue;
        }
        if words.get(i + 2) != Some(&&Token::RParen) {
            continue;
        }
        let mut next = i + 3;
        if words.get(next).is_some_and(|w| is_word(w, "AS")) {
            next += 1;
        }
        if let Some(Token::Word(w)) = words.get(next) {
            names.push(normalize(&w.value, w.quote_style.is_some()));
        }
    }
    names
}

/// Whether a window is laid over one of `columns`: `DESCRIPTOR(c)` of a window TVF, or
/// `TUMBLE(c, …)`, `HOP(c, …)`, `SESSION(c, …)` of a group window.
pub(super) fn windows_on(tokens: &[TokenWithSpan], columns: &[String]) -> bool {
    let words: Vec<&Token> = tokens
        .iter()
        .map(|t| &t.token)
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    words.windows(4).any(|w| {
        ["DESCRIPTOR", "TUMBLE", "HOP", "SESSION", "CUMULATE"]
            .iter()
            .any(|f| is_word(w[0], f))
            && *w[1] == Token::LParen
            && matches!(w[2], Token::Word(c) if columns.contains(&normalize(&c.value, c.quote_style.is_some())))
            && matches!(w[3], Token::RParen | Token::Comma)
    })
}
