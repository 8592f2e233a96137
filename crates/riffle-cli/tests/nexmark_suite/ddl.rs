//! Replacing a suite query's DDL, and only its DDL: its sink becomes a JSON-lines
//! `filesystem` table with the same columns; the rest of the text is kept as written.

use std::path::Path;

/// A declared sink column: name and Flink type, as written.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub flink_type: String,
}

/// A suite query with its DDL replaced.
pub struct Replaced {
    /// The pipeline riffle runs.
    pub text: String,
    /// The sink's columns, in order.
    pub columns: Vec<Column>,
}

/// Functions the suite declares as Java classes, declared as SQL expressions: the
/// suite's `CountChar` counts the occurrences of a character in a string (0 for NULL).
const FUNCTIONS: [(&str, &str); 1] = [(
    "count_char",
    "CREATE FUNCTION count_char(s VARCHAR, c VARCHAR) RETURNS BIGINT AS 'CASE WHEN s IS NULL THEN 0 ELSE char_length(s) - char_length(replace(s, substr(c, 1, 1), '''')) END';\n",
)];

/// Drops `-- …` comments (the suite's texts have none inside strings).
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|l| l.find("--").map_or(l, |p| &l[..p]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The statements of a text, split at `;` outside parentheses and quotes.
fn statements(text: &str) -> Vec<String> {
    let (mut out, mut current, mut depth, mut quoted) = (Vec::new(), String::new(), 0i32, false);
    for c in text.chars() {
        match c {
            '\'' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth -= 1,
            ';' if !quoted && depth == 0 => {
                out.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    out.push(current);
    out.into_iter().filter(|s| !s.trim().is_empty()).collect()
}

/// The text between the first `(` at or after `from` and its matching `)`, and the
/// index after that `)`.
fn parenthesized(s: &str, from: usize) -> (String, usize) {
    let open = from + s[from..].find('(').expect("a column list");
    let mut depth = 0;
    for (i, c) in s[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return (s[open + 1..open + i].to_string(), open + i + 1);
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced parentheses in {s}")
}

/// Splits a column list at top-level commas.
fn column_list(list: &str) -> Vec<Column> {
    let (mut parts, mut current, mut depth) = (Vec::new(), String::new(), 0);
    for c in list.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    parts
        .iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (name, ty) = p.split_once(char::is_whitespace).expect("name and type");
            Column {
                name: name.trim_matches('`').to_string(),
                flink_type: ty.trim().to_string(),
            }
        })
        .collect()
}

/// `flink_text` with its sink (`CREATE TABLE nexmark_…`) writing JSON lines to `out`,
/// with `PRIMARY KEY (keys)` when the result is updating, q13's `side_input` table
/// read with the options `side_input`, and `source_ddl` in front.
pub fn replace(
    flink_text: &str,
    source_ddl: &str,
    out: &Path,
    keys: &[&str],
    side_input: &str,
) -> Replaced {
    let mut text = source_ddl.to_string();
    let mut columns = Vec::new();
    for statement in statements(&strip_comments(flink_text)) {
        let trimmed = statement.trim();
        let upper = trimmed.to_uppercase();
        if upper.starts_with("CREATE TABLE NEXMARK_") {
            let (list, _) = parenthesized(trimmed, 0);
            let name = trimmed["CREATE TABLE ".len()..]
                .split(|c: char| c == '(' || c.is_whitespace())
                .next()
                .unwrap();
            columns = column_list(&list);
            let key = if keys.is_empty() {
                String::new()
            } else {
                format!(",\n  PRIMARY KEY ({}) NOT ENFORCED", keys.join(", "))
            };
            text.push_str(&format!(
                "CREATE TABLE {name} ({}{key}\n) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json');\n",
                list.trim_end(),
                out.display()
            ));
        } else if upper.starts_with("CREATE TABLE SIDE_INPUT") {
            let (list, _) = parenthesized(trimmed, 0);
            text.push_str(&format!(
                "CREATE TABLE side_input ({}\n) WITH ({side_input});\n",
                list.trim_end()
            ));
        } else if upper.starts_with("CREATE FUNCTION ") {
            let name = trimmed["CREATE FUNCTION ".len()..]
                .split_whitespace()
                .next()
                .unwrap_or_default();
            let (_, sql) = FUNCTIONS
                .iter()
                .find(|(n, _)| *n == name)
                .unwrap_or_else(|| panic!("no SQL declaration of the suite's function {name}"));
            text.push_str(sql);
        } else {
            text.push_str(trimmed);
            text.push_str(";\n");
        }
    }
    Replaced { text, columns }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sink_ddl_changes() {
        let q = "-- a comment; with a semicolon\nCREATE TABLE nexmark_q9 (\n  a BIGINT,\n  `d` DECIMAL(23, 3)\n) PARTITIONED BY (a) WITH (\n  'connector' = 'blackhole'\n);\n\nINSERT INTO nexmark_q9 SELECT a, 0.5 * a FROM bid WHERE x = ';';";
        let r = replace(q, "SRC;\n", Path::new("/o"), &["a"], "");
        assert_eq!(r.columns.len(), 2);
        assert_eq!(r.columns[1].name, "d");
        assert_eq!(r.columns[1].flink_type, "DECIMAL(23, 3)");
        assert!(r.text.starts_with("SRC;\nCREATE TABLE nexmark_q9 (\n  a BIGINT,\n  `d` DECIMAL(23, 3),\n  PRIMARY KEY (a) NOT ENFORCED\n) WITH ('connector' = 'filesystem', 'path' = '/o', 'format' = 'json');\n"), "{}", r.text);
        assert!(
            r.text
                .ends_with("INSERT INTO nexmark_q9 SELECT a, 0.5 * a FROM bid WHERE x = ';';\n"),
            "{}",
            r.text
        );
    }
}
