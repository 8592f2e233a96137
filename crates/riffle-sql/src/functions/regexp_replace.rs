//! `REGEXP_REPLACE(text, regex, replacement)`: Flink's (Java's `String.replaceAll`):
//! every match replaced, `$n` in the replacement naming group `n` and `\x` a literal
//! `x`; NULL when any argument is NULL. DataFusion's `regexp_replace` replaces only the
//! first match unless given the `'g'` flag, so a Flink query would silently keep the
//! rest; riffle replaces it.
//!
//! Pattern and replacement must be literals, checked once at planning: a pattern Rust's
//! `regex` does not accept (Java's look-around, back-references) is refused, named.

use datafusion::arrow::array::{Array, AsArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{exec_err, plan_err, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use regex::Regex;
use std::sync::Arc;

/// A Java replacement string in the `regex` crate's syntax: `$n` → `${n}`, `\x` → `x`,
/// and a literal `$` doubled. As in Java, a group number takes its first digit and then
/// each next digit while the number stays a group of the pattern (which has `groups`
/// groups, the whole match included): `$12` with one group is group 1, then `2`.
pub fn java_replacement(java: &str, groups: usize) -> std::result::Result<String, String> {
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(x) => out.push(x),
                None => return Err("it ends with a lone `\\`".into()),
            },
            '$' => {
                let Some(first) = chars.next().and_then(|d| d.to_digit(10)) else {
                    return Err(
                        "`$` must be followed by a group number (write `\\$` for a dollar sign)"
                            .into(),
                    );
                };
                let mut group = first as usize;
                if group >= groups {
                    return Err(format!("there is no group {group} in the pattern"));
                }
                while let Some(next) = chars.peek().and_then(|d| d.to_digit(10)) {
                    let longer = group * 10 + next as usize;
                    if longer >= groups {
                        break;
                    }
                    group = longer;
                    chars.next();
                }
                out.push_str(&format!("${{{group}}}"));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

fn literal<'a>(value: Option<&'a ScalarValue>, what: &str) -> Result<&'a str> {
    match super::string_literal(value) {
        Some(v) => Ok(v),
        None => plan_err!(
            "REGEXP_REPLACE takes its {what} as a string literal, e.g. REGEXP_REPLACE(url, '[0-9]+', '#')"
        ),
    }
}

/// The compiled pattern and the replacement in `regex` syntax.
fn compile(
    pattern: Option<&ScalarValue>,
    replacement: Option<&ScalarValue>,
) -> Result<(Regex, String)> {
    let p = literal(pattern, "pattern")?;
    let r = literal(replacement, "replacement")?;
    let regex = Regex::new(p)
        .or_else(|e| plan_err!("REGEXP_REPLACE pattern '{p}' is not supported: {e}"))?;
    let replacement = java_replacement(r, regex.captures_len())
        .or_else(|e| plan_err!("REGEXP_REPLACE replacement '{r}': {e}"))?;
    Ok((regex, replacement))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct RegexpReplace {
    signature: Signature,
}

impl ScalarUDFImpl for RegexpReplace {
    fn name(&self) -> &str {
        "regexp_replace"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        if args.arg_fields.len() != 3 {
            return plan_err!(
                "REGEXP_REPLACE takes text, a pattern and a replacement (every match is replaced, as in Flink)"
            );
        }
        compile(args.scalar_arguments[1], args.scalar_arguments[2])?;
        Ok(Arc::new(Field::new(self.name(), DataType::Utf8, true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [text, ColumnarValue::Scalar(p), ColumnarValue::Scalar(r)] = args.args.as_slice()
        else {
            return exec_err!("REGEXP_REPLACE takes a literal pattern and replacement");
        };
        let (regex, replacement) = compile(Some(p), Some(r))?;
        let text = cast(&text.to_array(args.number_rows)?, &DataType::Utf8)?;
        let text = text.as_string::<i32>();
        let mut out = StringBuilder::with_capacity(text.len(), text.value_data().len());
        for i in 0..text.len() {
            if text.is_null(i) {
                out.append_null();
            } else {
                out.append_value(regex.replace_all(text.value(i), replacement.as_str()));
            }
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish())))
    }
}

/// `regexp_replace` with Flink's semantics, to register with the planner (it replaces
/// DataFusion's function of that name).
pub fn regexp_replace_udf() -> ScalarUDF {
    ScalarUDF::from(RegexpReplace {
        signature: Signature::any(3, Volatility::Immutable),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replace(text: &str, pattern: &str, java: &str) -> String {
        let regex = Regex::new(pattern).unwrap();
        let replacement = java_replacement(java, regex.captures_len()).unwrap();
        regex.replace_all(text, replacement.as_str()).into_owned()
    }

    #[test]
    fn every_match_is_replaced_as_flinks_documentation_shows() {
        // Flink's documentation: REGEXP_REPLACE('foobar', 'oo|ar', '') = 'fb'.
        assert_eq!(replace("foobar", "oo|ar", ""), "fb");
        assert_eq!(replace("a1b22c333", "[0-9]+", "#"), "a#b#c#");
    }

    #[test]
    fn java_group_references_and_escapes() {
        assert_eq!(
            replace("2023-11-14", "(\\d+)-(\\d+)-(\\d+)", "$3/$2/$1"),
            "14/11/2023"
        );
        // `$1x` is group 1 then `x` in Java (the regex crate would read a group `1x`).
        assert_eq!(replace("ab", "(a)", "$1x"), "axb");
        assert_eq!(replace("price", "price", "\\$5"), "$5");
        // One group: `$12` is group 1, then `2`, as Java reads it.
        assert_eq!(replace("ab", "(a)", "$12"), "a2b");
        assert!(java_replacement("a $ b", 1).is_err());
        assert!(java_replacement("$2", 2).is_err());
    }
}
