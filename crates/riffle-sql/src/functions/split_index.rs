//! `SPLIT_INDEX(text, separator, index)`: Flink's zero-based field of `text` split at
//! every `separator` (empty fields kept). NULL when any argument is NULL, the index is
//! negative or past the last field — where DataFusion's `split_part` returns `''`.

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{exec_err, plan_err, Result};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use std::sync::Arc;

/// Field `index` of `text` split at `separator`, as Flink returns it.
pub fn split_index<'t>(text: &'t str, separator: &str, index: i64) -> Option<&'t str> {
    Separator::new(separator).field(text, index)
}

/// A separator prepared once for the texts of a batch: one byte found by a word-wise
/// scan that stops at the field's end (a `memchr` call per separator cost more than
/// it saved on URL-length texts: a third of Nexmark q22's time), a longer one by a
/// prebuilt `memmem` finder (`str::split` builds a searcher per call).
enum Separator<'s> {
    /// Flink (Apache Commons' whole-separator split) splits at whitespace for `''`.
    Whitespace,
    Byte(u8),
    Text(Box<memchr::memmem::Finder<'s>>),
}

impl<'s> Separator<'s> {
    fn new(separator: &'s str) -> Self {
        match separator.as_bytes() {
            [] => Self::Whitespace,
            [b] => Self::Byte(*b),
            _ => Self::Text(Box::new(memchr::memmem::Finder::new(separator))),
        }
    }

    fn field<'t>(&self, text: &'t str, index: i64) -> Option<&'t str> {
        let index = usize::try_from(index).ok()?;
        if text.is_empty() {
            // Flink splits an empty string into no fields at all.
            return None;
        }
        match self {
            Self::Whitespace => text.split_whitespace().nth(index),
            Self::Byte(b) => byte_field(text, *b, index),
            Self::Text(f) => nth_field(text, f.find_iter(text.as_bytes()), f.needle().len(), index),
        }
    }
}

/// Field `index` of `text` split at the byte `separator`, scanning eight bytes at a
/// time: each word's bytes equal to the separator are found at once (an exact
/// zero-byte test on `word ^ separator`, no carries between bytes), then taken in order.
fn byte_field(text: &str, separator: u8, index: usize) -> Option<&str> {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let bytes = text.as_bytes();
    let splat = u64::from_le_bytes([separator; 8]);
    let mut field = 0;
    let mut start = 0;
    // Separator positions in `bytes[base..]` as the high bits of their bytes.
    let mut take = |base: usize, mut hits: u64| -> Option<usize> {
        while hits != 0 {
            let at = base + (hits.trailing_zeros() / 8) as usize;
            if field == index {
                return Some(at);
            }
            field += 1;
            start = at + 1;
            hits &= hits - 1;
        }
        None
    };
    let mut words = bytes.chunks_exact(8);
    let mut base = 0;
    let mut end = None;
    for word in &mut words {
        let x = u64::from_le_bytes(std::array::from_fn(|k| word[k])) ^ splat;
        end = take(base, !(((x & LOW7) + LOW7) | x | LOW7));
        if end.is_some() {
            break;
        }
        base += 8;
    }
    if end.is_none() {
        for (k, &c) in words.remainder().iter().enumerate() {
            if c == separator {
                end = take(base + k, 0x80);
                if end.is_some() {
                    break;
                }
            }
        }
    }
    // A separator byte in valid UTF-8 is a whole (ASCII) character.
    match end {
        Some(end) => text.get(start..end),
        None => (field == index).then(|| text.get(start..)).flatten(),
    }
}

/// Field `index` of `text` given where its separators (`width` bytes each) start.
fn nth_field(
    text: &str,
    mut separators: impl Iterator<Item = usize>,
    width: usize,
    index: usize,
) -> Option<&str> {
    let mut start = 0;
    for _ in 0..index {
        start = separators.next()? + width;
    }
    let end = separators.next().unwrap_or(text.len());
    // A separator found in valid UTF-8 starts and ends on character boundaries.
    text.get(start..end)
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct SplitIndex {
    signature: Signature,
}

impl ScalarUDFImpl for SplitIndex {
    fn name(&self) -> &str {
        "split_index"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let types: Vec<&DataType> = args.arg_fields.iter().map(|f| f.data_type()).collect();
        let text = super::is_text;
        match types.as_slice() {
            [a, b, c] if text(a) && text(b) && (c.is_integer() || **c == DataType::Null) => {
                Ok(Arc::new(Field::new(self.name(), DataType::Utf8, true)))
            }
            _ => plan_err!(
                "SPLIT_INDEX takes (VARCHAR, VARCHAR, INT), not ({})",
                types
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let [text, separator, index] = args.args.as_slice() else {
            return exec_err!("SPLIT_INDEX takes text, a separator and an index");
        };
        let text = cast(&text.to_array(n)?, &DataType::Utf8)?;
        let separator = cast(&separator.to_array(n)?, &DataType::Utf8)?;
        let index = cast(&index.to_array(n)?, &DataType::Int64)?;
        let (text, separator) = (text.as_string::<i32>(), separator.as_string::<i32>());
        let index = index.as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        let mut out = StringBuilder::with_capacity(n, n * 8);
        // The usual call has a literal separator: prepare it once for the batch.
        let shared = match &args.args[1] {
            ColumnarValue::Scalar(_) if n > 0 && separator.is_valid(0) => {
                Some(Separator::new(separator.value(0)))
            }
            _ => None,
        };
        for i in 0..n {
            if text.is_null(i) || separator.is_null(i) || index.is_null(i) {
                out.append_null();
                continue;
            }
            let field = match &shared {
                Some(s) => s.field(text.value(i), index.value(i)),
                None => split_index(text.value(i), separator.value(i), index.value(i)),
            };
            out.append_option(field);
        }
        Ok(ColumnarValue::Array(Arc::new(out.finish()) as ArrayRef))
    }
}

/// `split_index`, to register with the planner.
pub fn split_index_udf() -> ScalarUDF {
    ScalarUDF::from(SplitIndex {
        signature: Signature::any(3, Volatility::Immutable),
    })
}

#[cfg(test)]
mod tests {
    use super::{byte_field, split_index};

    #[test]
    fn a_byte_separator_splits_as_str_split_does() {
        let mut state = 11u64;
        for _ in 0..5000 {
            let text: String = (0..(state % 40))
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ['a', '/', 'é', 'b'][(state >> 60) as usize % 4]
                })
                .collect();
            for index in 0..6 {
                assert_eq!(
                    byte_field(&text, b'/', index),
                    text.split('/').nth(index),
                    "{text:?} field {index}"
                );
            }
        }
    }

    #[test]
    fn fields_count_from_zero_and_past_the_end_is_null() {
        // Flink's documentation: SPLIT_INDEX('Hello,World', ',', 0) = 'Hello'.
        let url = "https://www.nexmark.com/abc/def/item.htm?query=1";
        assert_eq!(split_index(url, "/", 0), Some("https:"));
        assert_eq!(split_index(url, "/", 1), Some(""));
        assert_eq!(split_index(url, "/", 3), Some("abc"));
        assert_eq!(split_index(url, "/", 5), Some("item.htm?query=1"));
        assert_eq!(split_index(url, "/", 6), None);
        assert_eq!(split_index("Hello,World", ",", -1), None);
        assert_eq!(split_index("", ",", 0), None);
    }

    #[test]
    fn separators_are_whole_strings() {
        assert_eq!(split_index("a::b:c", "::", 1), Some("b:c"));
        assert_eq!(split_index("a b  c", "", 2), Some("c"));
        assert_eq!(split_index("a::b::", "::", 2), Some(""));
        assert_eq!(split_index("a:::b", "::", 1), Some(":b"));
        assert_eq!(split_index("é/ü/x", "/", 1), Some("ü"));
        assert_eq!(split_index("é→ü→x", "→", 2), Some("x"));
    }
}
