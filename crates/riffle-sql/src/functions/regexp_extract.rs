//! `REGEXP_EXTRACT(text, regex[, group])`: Flink's group `group` (0 = the whole match,
//! the default) of the first match of `regex` in `text`; NULL when any argument is
//! NULL, nothing matches, or the group does not exist or did not take part.
//!
//! The pattern must be a literal. It is checked at planning: a pattern Rust's `regex`
//! does not accept (Java's look-around, back-references) is refused there, named,
//! rather than returning NULL on every row as Flink does for a pattern it rejects. The
//! optimizer then binds each call to its compiled pattern ([`RegexpExtract`]), so a
//! running query never compiles it again, and a call with a constant group remembers its
//! answers for texts it has seen ([`TextMemo`]).

use super::text_memo::TextMemo;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, Int64Array, StringArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Int64Type};
use datafusion::common::{exec_err, plan_err, Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::{
    ColumnarValue, Expr, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use regex::{CaptureLocations, Regex};
use std::cell::RefCell;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use thread_local::ThreadLocal;

/// Where group `group` of the first match of `regex` lies in `text`, as byte offsets;
/// `slots` (`regex.capture_locations()`) is reused from one text to the next.
fn group_span(
    regex: &Regex,
    slots: &mut CaptureLocations,
    text: &str,
    group: i64,
) -> Option<(usize, usize)> {
    let group = usize::try_from(group).ok()?;
    regex.captures_read(slots, text)?;
    slots.get(group)
}

/// Group `group` of the first match of `regex` in `text`, as Flink returns it.
pub fn regexp_extract<'t>(
    regex: &Regex,
    slots: &mut CaptureLocations,
    text: &'t str,
    group: i64,
) -> Option<&'t str> {
    let (start, end) = group_span(regex, slots, text, group)?;
    text.get(start..end)
}

fn pattern(value: Option<&ScalarValue>) -> Result<Regex> {
    let Some(p) = super::string_literal(value) else {
        return plan_err!(
            "REGEXP_EXTRACT takes its pattern as a string literal, e.g. REGEXP_EXTRACT(url, 'id=([0-9]+)', 1)"
        );
    };
    Regex::new(p).or_else(|e| plan_err!("REGEXP_EXTRACT pattern '{p}' is not supported: {e}"))
}

/// The result field, after checking the arguments (both forms of the function).
fn result_field(args: &ReturnFieldArgs) -> Result<FieldRef> {
    let n = args.arg_fields.len();
    if !(2..=3).contains(&n) {
        return plan_err!("REGEXP_EXTRACT takes text, a pattern and optionally a group");
    }
    if n == 3 && !args.arg_fields[2].data_type().is_integer() {
        return plan_err!(
            "REGEXP_EXTRACT's group is an integer, not {}",
            args.arg_fields[2].data_type()
        );
    }
    pattern(args.scalar_arguments.get(1).copied().flatten())?;
    Ok(Arc::new(Field::new("regexp_extract", DataType::Utf8, true)))
}

/// Answers from one thread's memo, for one group.
#[derive(Debug, Default)]
struct GroupMemo {
    group: i64,
    spans: TextMemo<Option<(usize, usize)>>,
}

/// Evaluates the call on a batch; `memos` (one per thread) is used when the group is
/// the same for every row.
fn evaluate(
    regex: &Regex,
    args: &ScalarFunctionArgs,
    memos: Option<&ThreadLocal<RefCell<GroupMemo>>>,
) -> Result<ColumnarValue> {
    let n = args.number_rows;
    let (text, group) = match args.args.as_slice() {
        [t, _] => (t, None),
        [t, _, g] => (t, Some(g)),
        _ => return exec_err!("REGEXP_EXTRACT takes text, a pattern and optionally a group"),
    };
    let text = cast(&text.to_array(n)?, &DataType::Utf8)?;
    let text = text.as_string::<i32>();
    let mut out = StringBuilder::with_capacity(n, n * 8);
    let mut slots = regex.capture_locations();
    let constant_group = match group {
        None => Some(Some(0)),
        Some(ColumnarValue::Scalar(g)) => match g.cast_to(&DataType::Int64)? {
            ScalarValue::Int64(g) => Some(g),
            other => return exec_err!("REGEXP_EXTRACT's group is {other:?}, not an integer"),
        },
        Some(ColumnarValue::Array(_)) => None,
    };
    match (constant_group, memos) {
        (Some(None), _) => return Ok(ColumnarValue::Array(Arc::new(StringArray::new_null(n)))),
        (Some(Some(g)), Some(memos)) => {
            let mut memo = memos.get_or_default().borrow_mut();
            if memo.group != g {
                *memo = GroupMemo {
                    group: g,
                    spans: TextMemo::default(),
                };
            }
            for i in 0..n {
                if text.is_null(i) {
                    out.append_null();
                    continue;
                }
                let t = text.value(i);
                let span = memo
                    .spans
                    .answer(t, |t| group_span(regex, &mut slots, t, g));
                out.append_option(span.and_then(|(start, end)| t.get(start..end)));
            }
        }
        (constant, _) => {
            let groups = match (constant, group) {
                (Some(Some(g)), _) => Int64Array::from_value(g, n),
                (_, Some(g)) => cast(&g.to_array(n)?, &DataType::Int64)?
                    .as_primitive::<Int64Type>()
                    .clone(),
                (_, None) => Int64Array::from_value(0, n),
            };
            for i in 0..n {
                if text.is_null(i) || groups.is_null(i) {
                    out.append_null();
                } else {
                    let t = text.value(i);
                    out.append_option(regexp_extract(regex, &mut slots, t, groups.value(i)));
                }
            }
        }
    }
    Ok(ColumnarValue::Array(Arc::new(out.finish()) as ArrayRef))
}

/// `REGEXP_EXTRACT`. As registered it holds no pattern, and a call evaluated so (an
/// expression built without the optimizer) compiles its pattern per batch; the
/// optimizer binds each planned call with a literal pattern to a copy holding that
/// pattern compiled ([`ScalarUDFImpl::simplify`]).
#[derive(Debug)]
struct RegexpExtract {
    signature: Signature,
    compiled: Option<Compiled>,
}

/// One call's compiled pattern, and per thread the answers it remembers.
#[derive(Debug)]
struct Compiled {
    regex: Regex,
    memos: ThreadLocal<RefCell<GroupMemo>>,
}

impl RegexpExtract {
    /// What plan comparisons tell calls apart by: the pattern, when bound.
    fn pattern_text(&self) -> Option<&str> {
        self.compiled.as_ref().map(|c| c.regex.as_str())
    }
}

impl PartialEq for RegexpExtract {
    fn eq(&self, other: &Self) -> bool {
        self.signature == other.signature && self.pattern_text() == other.pattern_text()
    }
}

impl Eq for RegexpExtract {}

impl Hash for RegexpExtract {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.signature.hash(state);
        self.pattern_text().hash(state);
    }
}

impl ScalarUDFImpl for RegexpExtract {
    fn name(&self) -> &str {
        "regexp_extract"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        result_field(&args)
    }

    fn simplify(&self, args: Vec<Expr>, _: &SimplifyContext) -> Result<ExprSimplifyResult> {
        let (None, Some(Expr::Literal(p, _))) = (&self.compiled, args.get(1)) else {
            return Ok(ExprSimplifyResult::Original(args));
        };
        let bound = RegexpExtract {
            signature: self.signature.clone(),
            compiled: Some(Compiled {
                regex: pattern(Some(p))?,
                memos: ThreadLocal::new(),
            }),
        };
        Ok(ExprSimplifyResult::Simplified(Expr::ScalarFunction(
            ScalarFunction::new_udf(Arc::new(ScalarUDF::from(bound)), args),
        )))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        if let Some(c) = &self.compiled {
            return evaluate(&c.regex, &args, Some(&c.memos));
        }
        let Some(ColumnarValue::Scalar(p)) = args.args.get(1) else {
            return exec_err!("REGEXP_EXTRACT takes a literal pattern");
        };
        evaluate(&pattern(Some(p))?, &args, None)
    }
}

/// `regexp_extract`, to register with the planner.
pub fn regexp_extract_udf() -> ScalarUDF {
    ScalarUDF::from(RegexpExtract {
        signature: Signature::variadic_any(Volatility::Immutable),
        compiled: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extract<'t>(regex: &Regex, text: &'t str, group: i64) -> Option<&'t str> {
        regexp_extract(regex, &mut regex.capture_locations(), text, group)
    }

    #[test]
    fn flinks_documented_example_and_nexmark_q21() {
        // Flink's documentation: REGEXP_EXTRACT('foothebar', 'foo(.*?)(bar)', 2) = 'bar'.
        let r = Regex::new("foo(.*?)(bar)").unwrap();
        assert_eq!(extract(&r, "foothebar", 2), Some("bar"));
        assert_eq!(extract(&r, "foothebar", 1), Some("the"));
        assert_eq!(extract(&r, "foothebar", 0), Some("foothebar"));
        let q21 = Regex::new("(&|^)channel_id=([^&]*)").unwrap();
        assert_eq!(extract(&q21, "channel_id=9&x=1", 2), Some("9"));
        assert_eq!(extract(&q21, "a=1&channel_id=abc", 2), Some("abc"));
        assert_eq!(extract(&q21, "a=1", 2), None);
    }

    #[test]
    fn missing_or_idle_groups_are_null() {
        let r = Regex::new("a(b)?(c)").unwrap();
        assert_eq!(extract(&r, "ac", 1), None);
        assert_eq!(extract(&r, "ac", 3), None);
        assert_eq!(extract(&r, "ac", -1), None);
    }

    #[test]
    fn patterns_rust_cannot_run_are_refused() {
        let p = ScalarValue::Utf8(Some("a(?=b)".into()));
        let e = pattern(Some(&p)).unwrap_err().to_string();
        assert!(e.contains("'a(?=b)' is not supported"), "{e}");
    }
}
