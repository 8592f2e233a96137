//! The strict check of JSON lines before Arrow's decoder reads them.
//!
//! Arrow's JSON decoder is lenient where a silent wrong value follows: it takes `-`,
//! `1e`, `1.2.3` and `007` as numbers, raw control bytes (a TAB) inside strings, the
//! last of two values of one key, and a record broken over two lines (it reads the
//! batch as one stream, so `{"id":1` and `}{"id":2}` pass as two records). Each line is
//! therefore first parsed by serde_json, which holds to RFC 8259, and must be one JSON
//! object with each key once and nothing after it. The check also refuses what Arrow
//! would read as something else than the JSON says: a string of digits in a TIMESTAMP
//! column (text must be a date-time; epoch milliseconds are a JSON number), and a string
//! in an integer column that is not a JSON integer's spelling (`"1.5"`, `"007"`).
//!
//! A JSON object or array in a VARCHAR column is read as its text, as Flink reads it
//! (`json_text.rs`): the check hands back where such values are, and the string that
//! stands for each, for Arrow's decoder to read a string there.
//!
//! JSON's fast path (`flat_json.rs`) holds itself to the same rules and hands back any
//! line it doubts, so both paths refuse alike.

use crate::json_text::nested_text;
use serde::de::{self, Deserializer, Error as _, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;

/// What the check looks at in a column's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TextRule {
    /// TIMESTAMP: a string is a date-time, never a number of epoch milliseconds.
    DateTime,
    /// An integer type: a string is a JSON integer (`"12"`, `"-3"`).
    Integer,
    /// VARCHAR: an object or array is read as its text.
    Text,
}

/// An object or array in a VARCHAR column, read as its text: where it is in the text
/// checked, and the JSON string that stands for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rewrite {
    pub(crate) at: Range<usize>,
    pub(crate) string: String,
}

/// `text` with each of `rewrites` (in order, apart) in place of what it stands for.
pub(crate) fn rewritten(text: &[u8], rewrites: &[Rewrite]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + rewrites.len() * 16);
    let mut from = 0;
    for rewrite in rewrites {
        out.extend_from_slice(&text[from..rewrite.at.start]);
        out.extend_from_slice(rewrite.string.as_bytes());
        from = rewrite.at.end;
    }
    out.extend_from_slice(&text[from..]);
    out
}

/// Checks lines of JSON records of one schema.
#[derive(Debug, Clone, Default)]
pub(crate) struct JsonLineCheck {
    /// The columns whose values are looked at, by JSON key.
    rules: HashMap<String, TextRule>,
}

impl JsonLineCheck {
    /// A check that applies `rules` to the values of their columns (by name).
    pub(crate) fn new(rules: impl IntoIterator<Item = (String, TextRule)>) -> Self {
        Self {
            rules: rules.into_iter().collect(),
        }
    }

    /// Checks every line of `text` that is not blank; the objects and arrays in its
    /// VARCHAR columns, by their place in `text`.
    ///
    /// # Errors
    /// The first line that is not one strict JSON object of this schema: its number in
    /// `text` (from 1) and what is wrong, naming the field (`field '…'`) where one is.
    pub(crate) fn check_lines(&self, text: &[u8]) -> std::result::Result<Vec<Rewrite>, String> {
        // (One record is named by its caller; only a batch's lines are numbered here.)
        let one = !text.trim_ascii().contains(&b'\n');
        let mut rewrites = Vec::new();
        let mut line_start = 0;
        for (i, line) in text.split(|&b| b == b'\n').enumerate() {
            let start = line_start;
            line_start += line.len() + 1;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let found = self.check_record(line).map_err(|e| match one {
                true => e,
                false => format!("{e} (line {} of the batch)", i + 1),
            })?;
            rewrites.extend(found.into_iter().map(|r| Rewrite {
                at: start + r.at.start..start + r.at.end,
                string: r.string,
            }));
        }
        Ok(rewrites)
    }

    /// Checks `text` as one record: one line of a file, or one Kafka value, whose JSON
    /// may span lines (a pretty-printed value).
    ///
    /// Returns the objects and arrays in its VARCHAR columns, by their place in `line`.
    ///
    /// # Errors
    /// What is wrong with it.
    pub(crate) fn check_record(&self, line: &[u8]) -> std::result::Result<Vec<Rewrite>, String> {
        let mut parser = serde_json::Deserializer::from_slice(line);
        let rewrites = parser
            .deserialize_map(Record {
                rules: &self.rules,
                line,
            })
            .map_err(|e| match e.classify() {
                serde_json::error::Category::Data => e.to_string(),
                _ => format!("not JSON: {e}"),
            })?;
        parser
            .end()
            .map_err(|e| format!("text after the record, from column {}", e.column()))?;
        Ok(rewrites)
    }
}

/// The record's object: each key once, each value checked by its column's rule.
struct Record<'a> {
    rules: &'a HashMap<String, TextRule>,
    /// The record's text (a value's place in it is where its raw text lies).
    line: &'a [u8],
}

impl<'de> Visitor<'de> for Record<'_> {
    type Value = Vec<Rewrite>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object (one record per line)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<Rewrite>, A::Error> {
        let mut keys: Vec<Cow<'de, str>> = Vec::new();
        let mut rewrites = Vec::new();
        while let Some(Key(key)) = map.next_key()? {
            if keys.contains(&key) {
                return Err(A::Error::custom(format!(
                    "field '{key}': the key appears twice in the record"
                )));
            }
            let value: &'de RawValue = map.next_value()?;
            if let Some(rule) = self.rules.get(&*key) {
                let text = check_value(*rule, value.get())
                    .map_err(|e| A::Error::custom(format!("field '{key}': {e}")))?;
                if let Some(text) = text {
                    // (The raw value borrows from the line: its address tells its place.)
                    let start = value.get().as_ptr() as usize - self.line.as_ptr() as usize;
                    rewrites.push(Rewrite {
                        at: start..start + value.get().len(),
                        string: serde_json::to_string(&text).map_err(A::Error::custom)?,
                    });
                }
            }
            keys.push(key);
        }
        Ok(rewrites)
    }
}

/// A key, borrowed from the line unless it holds an escape.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(v.to_string())))
    }
}

/// Checks a value's JSON text (as serde_json validated it) against `rule`; the text of
/// an object or array in a VARCHAR column.
fn check_value(rule: TextRule, raw: &str) -> std::result::Result<Option<String>, String> {
    if rule == TextRule::Text {
        // (A string is text as it is; other values the column decides.)
        return match raw.starts_with(['{', '[']) {
            true => nested_text(raw).map(Some),
            false => Ok(None),
        };
    }
    if !raw.starts_with('"') {
        return Ok(None); // a number, literal, object or array: the column decides
    }
    let text: Cow<'_, str> = if raw.contains('\\') {
        Cow::Owned(serde_json::from_str::<String>(raw).map_err(|e| e.to_string())?)
    } else {
        Cow::Borrowed(&raw[1..raw.len() - 1])
    };
    match rule {
        TextRule::DateTime if is_signed_digits(&text) => Err(format!(
            "the text `{text}` is not a date-time (epoch milliseconds are a JSON number, not a string)"
        )),
        TextRule::Integer if !is_json_integer(&text) => Err(format!(
            "the text `{text}` is not an integer (a string in an integer column holds a JSON integer: no fraction, sign `+` or leading zero)"
        )),
        _ => Ok(None),
    }
}

/// Whether `text` is an optional sign, then digits: what a TIMESTAMP column would read
/// as epoch milliseconds.
pub(crate) fn is_signed_digits(text: &str) -> bool {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `text` is a JSON integer: `-` optionally, then `0` or digits not starting
/// with `0`.
pub(crate) fn is_json_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    match digits.as_bytes() {
        [] => false,
        [b'0'] => true,
        [b'0', ..] => false,
        bytes => bytes.iter().all(u8::is_ascii_digit),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check() -> JsonLineCheck {
        JsonLineCheck::new([
            ("ts".to_string(), TextRule::DateTime),
            ("i".to_string(), TextRule::Integer),
        ])
    }

    fn refused(line: &str) -> String {
        check()
            .check_record(line.as_bytes())
            .expect_err(&format!("accepted: {line}"))
    }

    #[test]
    fn strict_json_records_pass() {
        for line in [
            r#"{"i":1,"ts":"2025-01-01T00:00:00Z","s":"a\tb \u00e9","f":-0.5e-3}"#,
            r#"  {"i":"12","ts":1700000003217,"x":{"y":[1,{"z":null}]},"i2":"007"} "#,
            "{\"i\":-0,\"b\":true}\r",
            r#"{"i":"-3","ts":null,"\u0069x":1}"#,
            r#"{}"#,
        ] {
            check()
                .check_record(line.as_bytes())
                .unwrap_or_else(|e| panic!("{line}: {e}"));
        }
    }

    #[test]
    fn numbers_that_are_not_json_are_refused() {
        for line in [
            r#"{"s":-}"#,
            r#"{"s":1e}"#,
            r#"{"s":1.2.3}"#,
            r#"{"s":007}"#,
            r#"{"f":1.}"#,
            r#"{"f":00.5}"#,
            r#"{"f":.5}"#,
            r#"{"f":+1}"#,
            r#"{"f":NaN}"#,
            r#"{"f":0x10}"#,
        ] {
            assert!(refused(line).starts_with("not JSON"), "{line}");
        }
    }

    #[test]
    fn raw_control_bytes_in_strings_are_refused() {
        for line in ["{\"s\":\"a\tb\"}", "{\"s\":\"a\u{1}b\"}", "{\"s\u{1f}\":1}"] {
            assert!(refused(line).contains("control character"), "{line:?}");
        }
    }

    #[test]
    fn a_key_twice_is_refused_naming_it() {
        assert!(refused(r#"{"i":1,"i":2}"#).starts_with("field 'i': the key appears twice"));
        // Also a key no column reads, and one spelled with an escape.
        assert!(refused(r#"{"x":1,"y":2,"x":1}"#).starts_with("field 'x'"));
        assert!(refused(r#"{"x":1,"\u0078":1}"#).starts_with("field 'x'"));
    }

    #[test]
    fn a_line_is_one_whole_object() {
        assert!(refused(r#"{"i":1,"s":"a""#).starts_with("not JSON: EOF"));
        assert!(refused(r#"}{"i":2}"#).starts_with("not JSON"));
        assert!(refused(r#"{"i":1} {"i":2}"#).starts_with("text after the record"));
        assert!(refused(r#"{"i":1} x"#).starts_with("text after the record"));
        assert!(refused("[1,2]").contains("a JSON object"));
        assert!(refused("\u{feff}{\"i\":1}").starts_with("not JSON"));
        // One record may span lines (a Kafka value printed pretty); lines may not.
        check()
            .check_record(b"{\n  \"i\": 1,\n  \"s\": \"a\"\n}\n")
            .unwrap();
        assert!(check().check_lines(b"{\n  \"i\": 1\n}\n").is_err());
        // Broken over two lines, each line is refused on its own.
        let err = check()
            .check_lines(b"{\"i\":1}\n{\"i\":1,\"s\":\"a\"\n}{\"i\":2}\n")
            .unwrap_err();
        assert!(err.ends_with("(line 2 of the batch)"), "{err}");
        assert!(!refused("{\"i\":1\n").contains("of the batch"));
    }

    #[test]
    fn digits_as_text_in_a_timestamp_column_are_refused() {
        for line in [
            r#"{"ts":"2023"}"#,
            r#"{"ts":"20230101"}"#,
            r#"{"ts":"-5"}"#,
            r#"{"ts":"\u0032023"}"#,
        ] {
            let err = refused(line);
            assert!(
                err.starts_with("field 'ts': the text `") && err.contains("is not a date-time"),
                "{line}: {err}"
            );
        }
        // Another column's digits are text like any other.
        check().check_record(br#"{"s":"2023"}"#).unwrap();
    }

    #[test]
    fn text_in_an_integer_column_must_be_a_json_integer() {
        for line in [
            r#"{"i":"1.5"}"#,
            r#"{"i":"007"}"#,
            r#"{"i":"+1"}"#,
            r#"{"i":" 1"}"#,
            r#"{"i":""}"#,
        ] {
            assert!(refused(line).starts_with("field 'i': the text"), "{line}");
        }
    }

    #[test]
    fn json_integers_have_one_spelling() {
        assert!(is_json_integer("0") && is_json_integer("-0") && is_json_integer("120"));
        assert!(!is_json_integer("01") && !is_json_integer("+1") && !is_json_integer("-"));
        assert!(is_signed_digits("+7") && is_signed_digits("0123"));
        assert!(!is_signed_digits("2023-01-01") && !is_signed_digits(""));
    }
}
