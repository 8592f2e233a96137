//! JSON lines of flat records decoded through simd-json's tape: the fast path of
//! [`crate::decode::RecordDecoder`] for JSON.
//!
//! Arrow's JSON decoder spent about two thirds of a JSON file source's time (its tape
//! alone a third); simd-json builds its tape of a line in about half that time. This
//! decoder takes only the common form of a record: one object per line, each key at
//! most once, its value null or of the field's own JSON type (a number for a number
//! column, a string for a VARCHAR one; an integer or a boolean for a VARCHAR is taken as
//! its text, as Arrow takes it; a TIMESTAMP column is handed over as text, an integer's
//! digits or a string that is not digits). It hands any other batch back, and the strict
//! check (`json_check.rs`) and Arrow's decoder decode it or name the error, so a record
//! decodes alike on either path (the tests below hold the two to that).
//!
//! simd-json is less strict than JSON in one way that matters here: it takes raw
//! control bytes (a TAB) inside strings. A line holding any byte below 0x20 is handed
//! back (a TAB between tokens is JSON, but rare), and so is one with half a surrogate
//! pair, or a key twice; its number parser holds to JSON's grammar (no leading zero,
//! no `1.`, no bare `-`), which the tests below check.

use crate::json_check::is_signed_digits;
use riffle_core::arrow::array::{
    ArrayBuilder, ArrayRef, ArrowPrimitiveType, BooleanBuilder, PrimitiveBuilder, StringBuilder,
};
use riffle_core::arrow::datatypes::{
    DataType, Field, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, Schema, SchemaRef,
    UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use riffle_core::RecordBatch;
use simd_json::{Buffers, Node, StaticNode};
use std::fmt::Write;
use std::sync::Arc;

/// The most fields a schema may have for this decoder: which fields a record named is
/// kept as the bits of a `u64`.
const MAX_FIELDS: usize = 64;

/// Decodes batches of JSON lines of one flat schema, or hands a batch back.
pub(crate) struct FlatJsonDecoder {
    /// The batches' schema: the schema taken, its TIMESTAMP columns as text.
    schema: SchemaRef,
    /// The types of the schema taken (a TIMESTAMP's column is built as a [`Column::DateTime`]).
    types: Vec<DataType>,
    names: Vec<String>,
    nullable: Vec<bool>,
    /// simd-json parses in place: each batch is copied here first.
    text: Vec<u8>,
    buffers: Buffers,
    tape: Option<simd_json::tape::Tape<'static>>,
    /// Where on a record's tape each key outside the schema is (kept between records).
    other_keys: Vec<usize>,
    /// Whether the last record held a number simd-json may have read without checking
    /// what follows it (see [`may_end_unchecked`]), or a nested value not looked into.
    unchecked_number: bool,
}

impl FlatJsonDecoder {
    /// A decoder for records of `schema`; `None` when a field's type is one this decoder
    /// leaves to Arrow's (or the schema has over [`MAX_FIELDS`] fields).
    pub(crate) fn new(schema: &SchemaRef) -> Option<Self> {
        let fields = schema.fields();
        let taken = fields.len() <= MAX_FIELDS
            && fields
                .iter()
                .all(|f| Column::new(f.data_type(), 0).is_some());
        let as_text: Vec<Field> = fields
            .iter()
            .map(|f| match f.data_type() {
                DataType::Timestamp(..) => f.as_ref().clone().with_data_type(DataType::Utf8),
                _ => f.as_ref().clone(),
            })
            .collect();
        taken.then(|| Self {
            schema: Arc::new(Schema::new_with_metadata(
                as_text,
                schema.metadata().clone(),
            )),
            types: fields.iter().map(|f| f.data_type().clone()).collect(),
            names: fields.iter().map(|f| f.name().clone()).collect(),
            nullable: fields.iter().map(|f| f.is_nullable()).collect(),
            text: Vec::new(),
            buffers: Buffers::new(1024),
            tape: None,
            other_keys: Vec::new(),
            unchecked_number: false,
        })
    }

    /// The `rows` records of `text`, one per line; `None` when a line is not of the form
    /// this decoder takes (or `text` holds another number of lines).
    pub(crate) fn decode(&mut self, text: &[u8], rows: usize) -> Option<RecordBatch> {
        let mut columns: Vec<Column> = self
            .types
            .iter()
            .map(|t| Column::new(t, rows))
            .collect::<Option<_>>()?;
        let mut copy = std::mem::take(&mut self.text);
        copy.clear();
        copy.extend_from_slice(text);
        let mut tape = self.tape.take().unwrap_or_else(simd_json::tape::Tape::null);
        let mut decoded = 0;
        let mut rest = &mut copy[..];
        let mut taken = true;
        let mut line_start = 0;
        while !rest.is_empty() {
            let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
            let (line, after) = rest.split_at_mut(end);
            rest = after.get_mut(1..).unwrap_or_default();
            // (simd-json parses `line` in place: its text as read is `original`.)
            let original = text.get(line_start..line_start + end).unwrap_or_default();
            line_start += end + 1;
            let mut line_tape = tape.reset();
            taken = decoded < rows
                && !has_control_byte(line)
                && !has_lone_surrogate(line)
                && simd_json::fill_tape(line, &mut self.buffers, &mut line_tape).is_ok()
                && self.record(&line_tape.0, &mut columns)
                && !(self.unchecked_number
                    && has_a_word_of_digits(original)
                    && !numbers_end_cleanly(original));
            tape = line_tape.reset();
            if !taken {
                break;
            }
            decoded += 1;
        }
        self.tape = Some(tape);
        self.text = copy;
        if !taken || decoded != rows {
            return None;
        }
        let arrays: Vec<ArrayRef> = columns.iter_mut().map(Column::finish).collect();
        RecordBatch::try_new(self.schema.clone(), arrays).ok()
    }

    /// Appends the record of one line's tape to `columns`; false when it is not of the
    /// form taken (`columns` are then part-way through a row, and dropped).
    fn record(&mut self, nodes: &[Node<'_>], columns: &mut [Column]) -> bool {
        let Some(Node::Object { len, .. }) = nodes.first() else {
            return false;
        };
        self.other_keys.clear();
        self.unchecked_number = false;
        let mut named: u64 = 0;
        let mut at = 1;
        // Records usually name the fields in one order: look first where the last
        // field's successor is.
        let mut guess = 0;
        for _ in 0..*len {
            let (Some(Node::String(key)), Some(value)) = (nodes.get(at), nodes.get(at + 1)) else {
                return false;
            };
            at += 2;
            self.unchecked_number |= may_end_unchecked(value);
            let field = if self.names.get(guess).is_some_and(|n| n == key) {
                Some(guess)
            } else {
                self.names.iter().position(|n| n == key)
            };
            let Some(i) = field else {
                // Another field: pass over its value, however nested.
                self.other_keys.push(at - 2);
                if let Node::Object { count, .. } | Node::Array { count, .. } = value {
                    at += count;
                }
                continue;
            };
            if named & (1 << i) != 0 {
                return false; // named twice: a malformed record
            }
            named |= 1 << i;
            guess = i + 1;
            let appended = match value {
                Node::Static(StaticNode::Null) if self.nullable[i] => {
                    columns[i].append_null();
                    true
                }
                Node::Static(value) => columns[i].append(value),
                Node::String(text) => columns[i].append_text(text),
                _ => false,
            };
            if !appended {
                return false;
            }
        }
        if has_a_key_twice(nodes, &self.other_keys) {
            return false;
        }
        // Fields the record does not name are NULL.
        for (i, column) in columns.iter_mut().enumerate() {
            if named & (1 << i) == 0 {
                if !self.nullable[i] {
                    return false;
                }
                column.append_null();
            }
        }
        true
    }
}

/// Whether simd-json may have read the number `value` without checking that a white
/// space or structural character follows it, or `value` is nested and not looked into.
///
/// simd-json 0.17 reads an integer of 18 digits or more, and a number with a fraction
/// of 19 digits or more, on slower paths that stop at the last digit and never look at
/// the next byte: `1234567890123456789x` was read as 1234567890123456789. An integer of
/// 18 digits is 10^17 or more; a number with a fraction is an F64, whatever its digits.
fn may_end_unchecked(value: &Node<'_>) -> bool {
    const EIGHTEEN_DIGITS: u64 = 100_000_000_000_000_000;
    match value {
        Node::Static(StaticNode::I64(v)) => v.unsigned_abs() >= EIGHTEEN_DIGITS,
        Node::Static(StaticNode::U64(v)) => *v >= EIGHTEEN_DIGITS,
        Node::Static(StaticNode::F64(_)) | Node::Object { .. } | Node::Array { .. } => true,
        _ => false,
    }
}

/// Whether `line` holds an 8-byte word (at a multiple of 8) of nothing but digits and
/// points: every number simd-json reads on a slow path (18 digits or more, or 19 in
/// the digits and point before an exponent) covers such a word, so a line without one
/// needs no [`numbers_end_cleanly`]. (Most floats, `12.5` or shortest-round-trip
/// doubles, are shorter: the common line is passed in one sweep.)
fn has_a_word_of_digits(line: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    line.chunks_exact(8).any(|word| {
        let Ok(bytes) = <[u8; 8]>::try_from(word) else {
            return false;
        };
        let x = u64::from_le_bytes(bytes);
        // A digit is below 10 after `^ 0x30`; the sum is below 0x80 only for those
        // (a carry comes only out of a byte that is no digit, and the word is not one).
        let y = x ^ (ONES * 0x30);
        let not_digit = (y | y.wrapping_add(ONES * 0x76)) & (ONES * 0x80);
        // A point is a zero byte after `^ 0x2E` (`/` after a point may pass as one too:
        // then the line is only checked needlessly).
        let z = x ^ (ONES * 0x2E);
        let point = z.wrapping_sub(ONES) & !z & (ONES * 0x80);
        not_digit & !point == 0
    })
}

/// Whether every number outside strings in `line` has JSON's grammar (`-`, an integer
/// part without a leading zero, a fraction, an exponent) and ends at white space or a
/// structural character.
fn numbers_end_cleanly(line: &[u8]) -> bool {
    let mut at = 0;
    while let Some(&byte) = line.get(at) {
        match byte {
            b'"' => {
                // To the string's end, over escapes.
                at += 1;
                loop {
                    let Some(found) = line.get(at..).and_then(|r| memchr::memchr2(b'"', b'\\', r))
                    else {
                        return true; // unterminated: simd-json refused it
                    };
                    at += found + 1;
                    if line[at - 1] == b'"' {
                        break;
                    }
                    at += 1; // the escaped byte
                }
            }
            b'-' | b'0'..=b'9' => {
                let Some(length) = json_number_length(&line[at..]) else {
                    return false;
                };
                at += length;
                if !matches!(
                    line.get(at),
                    None | Some(b' ' | b'\t' | b'\r' | b',' | b'}' | b']')
                ) {
                    return false;
                }
            }
            _ => at += 1,
        }
    }
    true
}

/// The length of the JSON number that begins `text`; `None` when it begins none.
fn json_number_length(text: &[u8]) -> Option<usize> {
    let digits = |from: usize| {
        text.iter()
            .skip(from)
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let mut at = usize::from(text.first() == Some(&b'-'));
    match text.get(at) {
        Some(b'0') => at += 1,
        Some(b'1'..=b'9') => at += digits(at),
        _ => return None,
    }
    if text.get(at) == Some(&b'.') {
        let n = digits(at + 1);
        if n == 0 {
            return None;
        }
        at += 1 + n;
    }
    if matches!(text.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(text.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        let n = digits(at);
        if n == 0 {
            return None;
        }
        at += n;
    }
    Some(at)
}

/// Whether two of the keys at `at` (positions on the record's tape) are the same.
fn has_a_key_twice(nodes: &[Node<'_>], at: &[usize]) -> bool {
    let key = |i: usize| match nodes.get(i) {
        Some(Node::String(key)) => *key,
        _ => "",
    };
    if at.len() <= 16 {
        return (1..at.len()).any(|j| (0..j).any(|i| key(at[i]) == key(at[j])));
    }
    let mut keys: Vec<&str> = at.iter().map(|&i| key(i)).collect();
    keys.sort_unstable();
    keys.windows(2).any(|pair| pair[0] == pair[1])
}

/// Whether `line` holds a byte below 0x20 anywhere but as its last byte (the CR of a
/// CRLF line end): simd-json takes raw control bytes inside strings, which JSON does
/// not. Eight bytes at a time: a byte below 0x20 borrows into its high bit when 0x20 is
/// subtracted, where no byte of 0x80 or more (`!x`) can set it (11 ns a Nexmark line,
/// against 18 for a byte-wise loop the compiler vectorizes).
fn has_control_byte(line: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let body = line.strip_suffix(b"\r").unwrap_or(line);
    let mut words = body.chunks_exact(8);
    let mut seen = 0u64;
    for word in &mut words {
        if let Ok(bytes) = <[u8; 8]>::try_from(word) {
            let x = u64::from_le_bytes(bytes);
            seen |= x.wrapping_sub(ONES * 0x20) & !x & (ONES * 0x80);
        }
    }
    seen != 0 || words.remainder().iter().any(|&b| b < 0x20)
}

/// Whether `line` holds a `\u` escape of half a UTF-16 surrogate pair without the
/// other half. simd-json reads a first half that ends a string as U+0000, where Arrow
/// (rightly) fails: such a line is left to Arrow.
fn has_lone_surrogate(line: &[u8]) -> bool {
    let unit = |at: usize| {
        let digits = std::str::from_utf8(line.get(at..at + 4)?).ok()?;
        u16::from_str_radix(digits, 16).ok()
    };
    let mut at = 0;
    while let Some(found) = memchr::memchr(b'\\', &line[at.min(line.len())..]) {
        let escape = at + found;
        if line.get(escape + 1) != Some(&b'u') {
            at = escape + 2; // passes over the escaped character (`\\` too)
            continue;
        }
        at = escape + 6;
        match unit(escape + 2) {
            Some(0xD800..=0xDBFF) => {
                let second_half = line.get(at..at + 2) == Some(b"\\u")
                    && matches!(unit(at + 2), Some(0xDC00..=0xDFFF));
                if !second_half {
                    return true;
                }
                at += 6;
            }
            Some(0xDC00..=0xDFFF) => return true,
            _ => {}
        }
    }
    false
}

/// One column being built.
enum Column {
    Int8(PrimitiveBuilder<Int8Type>),
    Int16(PrimitiveBuilder<Int16Type>),
    Int32(PrimitiveBuilder<Int32Type>),
    Int64(PrimitiveBuilder<Int64Type>),
    UInt8(PrimitiveBuilder<UInt8Type>),
    UInt16(PrimitiveBuilder<UInt16Type>),
    UInt32(PrimitiveBuilder<UInt32Type>),
    UInt64(PrimitiveBuilder<UInt64Type>),
    Float64(PrimitiveBuilder<Float64Type>),
    Boolean(BooleanBuilder),
    Utf8(StringBuilder),
    /// A TIMESTAMP column as its text: an integer's digits (epoch milliseconds) or a
    /// string that is not digits (a date-time; digits as text are malformed).
    DateTime(StringBuilder),
}

impl Column {
    /// A column of `rows` rows of `data_type`; `None` for a type this decoder leaves
    /// to Arrow's. (Float32 is not taken: a number parsed to f64 and then narrowed may
    /// round differently from Arrow's parse straight to f32.)
    fn new(data_type: &DataType, rows: usize) -> Option<Self> {
        Some(match data_type {
            DataType::Int8 => Column::Int8(PrimitiveBuilder::with_capacity(rows)),
            DataType::Int16 => Column::Int16(PrimitiveBuilder::with_capacity(rows)),
            DataType::Int32 => Column::Int32(PrimitiveBuilder::with_capacity(rows)),
            DataType::Int64 => Column::Int64(PrimitiveBuilder::with_capacity(rows)),
            DataType::UInt8 => Column::UInt8(PrimitiveBuilder::with_capacity(rows)),
            DataType::UInt16 => Column::UInt16(PrimitiveBuilder::with_capacity(rows)),
            DataType::UInt32 => Column::UInt32(PrimitiveBuilder::with_capacity(rows)),
            DataType::UInt64 => Column::UInt64(PrimitiveBuilder::with_capacity(rows)),
            DataType::Float64 => Column::Float64(PrimitiveBuilder::with_capacity(rows)),
            DataType::Boolean => Column::Boolean(BooleanBuilder::with_capacity(rows)),
            DataType::Utf8 => Column::Utf8(StringBuilder::with_capacity(rows, rows * 16)),
            DataType::Timestamp(..) => {
                Column::DateTime(StringBuilder::with_capacity(rows, rows * 24))
            }
            _ => return None,
        })
    }

    fn builder(&mut self) -> &mut dyn ArrayBuilder {
        match self {
            Column::Int8(b) => b,
            Column::Int16(b) => b,
            Column::Int32(b) => b,
            Column::Int64(b) => b,
            Column::UInt8(b) => b,
            Column::UInt16(b) => b,
            Column::UInt32(b) => b,
            Column::UInt64(b) => b,
            Column::Float64(b) => b,
            Column::Boolean(b) => b,
            Column::Utf8(b) | Column::DateTime(b) => b,
        }
    }

    fn finish(&mut self) -> ArrayRef {
        self.builder().finish()
    }

    fn append_null(&mut self) {
        match self {
            Column::Int8(b) => b.append_null(),
            Column::Int16(b) => b.append_null(),
            Column::Int32(b) => b.append_null(),
            Column::Int64(b) => b.append_null(),
            Column::UInt8(b) => b.append_null(),
            Column::UInt16(b) => b.append_null(),
            Column::UInt32(b) => b.append_null(),
            Column::UInt64(b) => b.append_null(),
            Column::Float64(b) => b.append_null(),
            Column::Boolean(b) => b.append_null(),
            Column::Utf8(b) | Column::DateTime(b) => b.append_null(),
        }
    }

    /// Appends a JSON number or boolean; false when this column does not take it so.
    ///
    /// simd-json reads `-0` as the integer 0 (Arrow: -0.0 in a DOUBLE, `-0` in a
    /// VARCHAR), and a number with a fraction or an exponent as an f64, whose text is
    /// gone: those are left to Arrow where it matters.
    fn append(&mut self, value: &StaticNode) -> bool {
        let negative_zero = matches!(value, StaticNode::I64(0));
        // (A boolean is text in a VARCHAR column, no time in a TIMESTAMP one.)
        let takes_booleans = matches!(self, Column::Utf8(_));
        match self {
            Column::Int8(b) => append_integer(b, value),
            Column::Int16(b) => append_integer(b, value),
            Column::Int32(b) => append_integer(b, value),
            Column::Int64(b) => append_integer(b, value),
            Column::UInt8(b) => append_integer(b, value),
            Column::UInt16(b) => append_integer(b, value),
            Column::UInt32(b) => append_integer(b, value),
            Column::UInt64(b) => append_integer(b, value),
            Column::Float64(b) => {
                // (An integer converts to the nearest f64, as Arrow's parse of its text
                // rounds.)
                let v = match *value {
                    StaticNode::I64(v) if !negative_zero => v as f64,
                    StaticNode::U64(v) => v as f64,
                    StaticNode::F64(v) => v,
                    _ => return false,
                };
                b.append_value(v);
                true
            }
            Column::Boolean(b) => match *value {
                StaticNode::Bool(v) => {
                    b.append_value(v);
                    true
                }
                _ => false,
            },
            // A JSON integer has one spelling (no sign but `-`, no leading zero), so
            // its value's digits are its text.
            Column::Utf8(b) | Column::DateTime(b) => {
                let written = match *value {
                    StaticNode::I64(v) if !negative_zero => write!(b, "{v}").is_ok(),
                    StaticNode::U64(v) => write!(b, "{v}").is_ok(),
                    StaticNode::Bool(v) if takes_booleans => write!(b, "{v}").is_ok(),
                    _ => false,
                };
                if written {
                    b.append_value(""); // ends the value written
                }
                written
            }
        }
    }

    /// Appends a JSON string; false when this column does not take one (Arrow parses a
    /// string in a number column; that is left to it).
    fn append_text(&mut self, text: &str) -> bool {
        match self {
            Column::Utf8(b) => {
                b.append_value(text);
                true
            }
            Column::DateTime(b) if !is_signed_digits(text) => {
                b.append_value(text);
                true
            }
            _ => false,
        }
    }
}

/// Appends a JSON integer that fits the column's type.
fn append_integer<T>(builder: &mut PrimitiveBuilder<T>, value: &StaticNode) -> bool
where
    T: ArrowPrimitiveType,
    T::Native: TryFrom<i64> + TryFrom<u64>,
{
    let fits = match *value {
        StaticNode::I64(v) => T::Native::try_from(v).ok(),
        StaticNode::U64(v) => T::Native::try_from(v).ok(),
        _ => None,
    };
    fits.map(|v| builder.append_value(v)).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::AsArray;
    use riffle_core::arrow::datatypes::TimeUnit;

    fn takes(schema: &Schema) -> bool {
        FlatJsonDecoder::new(&Arc::new(schema.clone())).is_some()
    }

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("i", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("f", DataType::Float64, true),
            Field::new("b", DataType::Boolean, true),
            Field::new("small", DataType::Int8, true),
            Field::new("u", DataType::UInt32, true),
            Field::new("must", DataType::Int32, false),
        ]))
    }

    /// The fallback's decoding of `text` (`rows` lines): the strict check, then
    /// Arrow's decoder, as the file source's decoder does it.
    fn arrow(schema: &SchemaRef, text: &[u8], rows: usize) -> Result<Option<RecordBatch>, String> {
        crate::decode::RecordDecoder::reading(crate::sinks::FileFormat::Jsonl, schema, None)
            .decode_without_fast_path(text, rows)
    }

    /// The rule of this decoder: where it decodes a line, it decodes it as the fallback
    /// does (and so never takes a line the fallback refuses). Returns whether it took
    /// the line. (`schema` has no TIMESTAMP column: the fallback's are timestamps.)
    fn agrees_with_arrow(schema: &SchemaRef, line: &str) -> bool {
        let mut flat = FlatJsonDecoder::new(schema).expect("a flat schema");
        let text = format!("{line}\n");
        let Some(ours) = flat.decode(text.as_bytes(), 1) else {
            return false;
        };
        match arrow(schema, text.as_bytes(), 1) {
            Ok(Some(theirs)) => assert_eq!(
                format!("{ours:?}"),
                format!("{theirs:?}"),
                "decoded otherwise than Arrow: {line}"
            ),
            other => panic!("taken, but the fallback says {other:?}: {line}"),
        }
        true
    }

    #[test]
    fn records_of_the_common_form_decode_as_arrow_decodes_them() {
        let schema = schema();
        for line in [
            r#"{"i":1,"s":"a","f":1.5,"b":true,"small":-3,"u":7,"must":1}"#,
            r#"{"must":2,"u":0,"small":127,"b":false,"f":-2,"s":"","i":-9223372036854775808}"#,
            r#"{"must":3}"#,
            r#"{"must":4,"i":null,"s":null,"f":null,"b":null,"small":null,"u":null}"#,
            r#"{"must":5,"s":"\u00e9\n\"q\" \\ \ud83d\ude00","other":{"deep":[1,{"x":[]}]},"i":9223372036854775807}"#,
            r#"{"must":6,"s":12345678901234567890,"f":9007199254740993}"#,
            r#"{"must":7,"s":-42,"f":1e-300,"extra":[1,2,3],"b":true}"#,
            r#"{"must":8,"s":true,"f":0.1}"#,
            r#"{"must":9,"s":false,"f":1234567890123456789012345678.9}"#,
            r#"  {"must":10 , "f" : 2.2250738585072014e-308 }  "#,
            "{\"must\":11,\"f\":4.9e-324}\r",
            r#"{"must":12,"f":1.7976931348623157e308,"x":null,"y":"z"}"#,
        ] {
            assert!(agrees_with_arrow(&schema, line), "not taken: {line}");
        }
    }

    #[test]
    fn other_forms_are_handed_to_arrow() {
        let schema = schema();
        for line in [
            // Arrow decodes these, otherwise than simd-json reads them or not at all.
            r#"{"must":1,"i":"12"}"#,
            r#"{"must":1,"i":1.0}"#,
            r#"{"must":1,"i":1,"i":2}"#,
            r#"{"must":1,"s":1.50}"#,
            r#"{"must":1,"s":-0}"#,
            r#"{"must":1,"f":-0}"#,
            r#"{"must":1,"small":128}"#,
            r#"{"must":1,"u":-1}"#,
            r#"{"must":1,"b":"true"}"#,
            r#"{"must":1,"s":{"a":1}}"#,
            r#"{"must":1,"f":123456789012345678901234567890}"#,
            r#"{"must":null}"#,
            r#"{}"#,
            r#"{"i":1}"#,
            // Not JSON, or not one record.
            r#"[1,2]"#,
            r#"null"#,
            r#"{"must":1} {"must":2}"#,
            r#"{"must":1,}"#,
            r#"{"must":01}"#,
            r#"{'must':1}"#,
            r#"{"must":NaN}"#,
            r#"{"must":+1}"#,
            r#"{"must":1"#,
            r#"{"must":1,"s":"\x"}"#,
            r#"{"must":1,"s":"\ud800"}"#,
            r#"{"must":1,"s":"\ud800x"}"#,
            r#"{"must":1,"s":"\udc00"}"#,
            r#"{"must":1,"s":"\ud800\u0041"}"#,
            r#"{"must":1,"s":"\ud83d\ud83d\ude00"}"#,
            "{\"must\":1,\"s\":\"tab\there\"}",
            "\u{feff}{\"must\":1}",
        ] {
            assert!(!agrees_with_arrow(&schema, line), "taken: {line}");
        }
    }

    /// What JSON does not allow, and Arrow's decoder took, this decoder hands back
    /// (and the fallback's strict check refuses): numbers not of JSON's grammar, raw
    /// control bytes, a key twice, more than one record or less than one on a line.
    #[test]
    fn what_is_not_json_is_handed_back_and_refused_by_the_fallback() {
        let schema = schema();
        for line in [
            r#"{"must":1,"s":-}"#,
            r#"{"must":1,"s":1e}"#,
            r#"{"must":1,"s":1.2.3}"#,
            r#"{"must":1,"s":007}"#,
            r#"{"must":1,"f":1.}"#,
            r#"{"must":1,"f":00.5}"#,
            r#"{"must":1,"f":-01}"#,
            r#"{"must":1,"f":.5}"#,
            r#"{"must":1,"f":1e+}"#,
            r#"{"must":1,"i":007}"#,
            r#"{"must":1,"i":1234567890123456789x}"#,
            r#"{"must":1,"i":12345678901234567890123x}"#,
            r#"{"must":1,"f":-1234567890123456789.5x}"#,
            r#"{"must":1,"f":12345678901234567890123x}"#,
            r#"{"must":1,"f":1234567890123456789x}"#,
            r#"{"must":1,"i":-}"#,
            r#"{"must":1,"b":tru}"#,
            r#"{"must":1,"b":truex}"#,
            r#"{"must":1,"x":nul}"#,
            "{\"must\":1,\"s\":\"a\tb\"}",
            "{\"must\":1,\"s\":\"a\u{1}b\"}",
            "{\"must\":1,\"x\":\"a\u{1f}b\"}",
            "{\"must\":1,\"s\u{7}\":1}",
            r#"{"must":1,"x":1,"x":2}"#,
            r#"{"must":1,"x":1,"y":{"x":3},"z":[],"x":2}"#,
            r#"{"must":1,"i":1,"i":2}"#,
            r#"{"must":1,"s":"a""#,
            r#"}{"must":2}"#,
            r#"{"must":1} x"#,
            r#"{"must":1}{"must":2}"#,
        ] {
            assert!(!agrees_with_arrow(&schema, line), "taken: {line:?}");
            let text = format!("{line}\n");
            assert!(
                arrow(&schema, text.as_bytes(), 1).is_err(),
                "the fallback took {line:?}"
            );
        }
        // Keys outside the schema are compared exactly, however many.
        let many: String = (0..40).map(|i| format!(",\"k{i}\":{i}")).collect();
        assert!(agrees_with_arrow(&schema, &format!("{{\"must\":1{many}}}")));
        let twice = format!("{{\"must\":1{many},\"k39\":0}}");
        assert!(!agrees_with_arrow(&schema, &twice));
        assert!(arrow(&schema, format!("{twice}\n").as_bytes(), 1).is_err());
    }

    #[test]
    fn a_timestamp_column_is_taken_as_text_but_not_as_digits_in_a_string() {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Nanosecond, None),
            true,
        )]));
        let mut flat = FlatJsonDecoder::new(&schema).expect("taken");
        let batch = flat
            .decode(
                b"{\"ts\":1700000003217}\n{\"ts\":\"2025-01-31T12:00:00Z\"}\n{}\n",
                3,
            )
            .expect("taken");
        assert_eq!(batch.schema().field(0).data_type(), &DataType::Utf8);
        let text: Vec<Option<&str>> = batch.column(0).as_string::<i32>().iter().collect();
        assert_eq!(
            text,
            [Some("1700000003217"), Some("2025-01-31T12:00:00Z"), None]
        );
        for line in [
            r#"{"ts":"2023"}"#,
            r#"{"ts":"-20230101"}"#,
            r#"{"ts":true}"#,
        ] {
            assert!(
                flat.decode(format!("{line}\n").as_bytes(), 1).is_none(),
                "{line}"
            );
        }
    }

    #[test]
    fn numbers_that_end_otherwise_than_json_says_are_found() {
        for (line, clean) in [
            (
                r#"{"a":1234567890123456789,"b":[-1.5e-3,0,2E+7],"c":"1x 2y"}"#,
                true,
            ),
            (
                r#"{"a":"12345678901234567890x\"1y","b":12345678901234567890}"#,
                true,
            ),
            (r#"{"a":1234567890123456789x}"#, false),
            (r#"{"a":-1.2345678901234567890x}"#, false),
            (r#"{"a":1.2.3}"#, false),
            (r#"{"a":01}"#, false),
            (r#"{"a":1.}"#, false),
            (r#"{"a":1e+}"#, false),
            (r#"{"a":-}"#, false),
            (r#"{"a":[1,2]x}"#, true), // not a number's end: simd-json refuses it
        ] {
            assert_eq!(numbers_end_cleanly(line.as_bytes()), clean, "{line}");
        }
        assert!(has_a_word_of_digits(b"{\"a\":1234567890123456789x}"));
        assert!(has_a_word_of_digits(b"{\"a\":-1.2345678901234567890x}"));
        assert!(!has_a_word_of_digits(
            b"{\"auction\":1000,\"price\":12.5,\"t\":\"2015-07-15 00:00:00.000\"}"
        ));
    }

    #[test]
    fn control_bytes_are_found_but_not_a_crlf_line_end() {
        assert!(!has_control_byte(b"{\"a\":1}\r"));
        assert!(!has_control_byte(&[b' '; 100]));
        assert!(has_control_byte(b"{\"a\":\"\t\"}"));
        assert!(has_control_byte(b"\r{}\r"));
        // Every byte at every place of a word, and UTF-8 (bytes of 0x80 and more) beside.
        for at in 0..24 {
            for byte in 0..=255u8 {
                let mut line = "é".repeat(12).into_bytes();
                line.push(b'}');
                line[at] = byte;
                assert_eq!(has_control_byte(&line), byte < 0x20, "{byte:#x} at {at}");
            }
        }
    }

    #[test]
    fn a_batch_is_taken_whole_or_not_at_all() {
        let schema = schema();
        let mut flat = FlatJsonDecoder::new(&schema).unwrap();
        let good = b"{\"must\":1,\"i\":1}\n{\"must\":2,\"i\":2}\n";
        let batch = flat.decode(good, 2).expect("taken");
        assert_eq!(batch.num_rows(), 2);
        // A line count other than the rows asked for, a bad line among good ones.
        assert!(flat.decode(good, 3).is_none());
        assert!(flat.decode(good, 1).is_none());
        assert!(flat
            .decode(b"{\"must\":1}\n{\"must\":\"x\"}\n{\"must\":3}\n", 3)
            .is_none());
        // The last line needs no newline, and the decoder goes on after a refusal.
        let again = flat
            .decode(b"{\"must\":5}\n{\"must\":6}", 2)
            .expect("taken");
        assert_eq!(
            format!("{again:?}"),
            format!(
                "{:?}",
                arrow(&schema, b"{\"must\":5}\n{\"must\":6}", 2)
                    .unwrap()
                    .unwrap()
            )
        );
    }

    #[test]
    fn half_a_surrogate_pair_is_found_and_a_whole_one_is_not() {
        for (line, lone) in [
            (r#""\ud800""#, true),
            (r#""\uDBFFx""#, true),
            (r#""\udc00""#, true),
            (r#""\ud800\u0041""#, true),
            (r#""\ud800\\udc00""#, true),
            (r#""\ud83d\ude00""#, false),
            (r#""\\ud800""#, false),
            (r#""\u00e9\n\\""#, false),
            (r#""\ud8""#, false),
            ("\\", false),
        ] {
            assert_eq!(has_lone_surrogate(line.as_bytes()), lone, "{line}");
        }
    }

    #[test]
    fn schemas_with_other_types_are_left_to_arrow() {
        assert!(takes(&schema()));
        for other in [
            DataType::Float32,
            DataType::Date32,
            DataType::Decimal128(10, 2),
            DataType::LargeUtf8,
            DataType::List(Arc::new(Field::new("item", DataType::Int64, true))),
        ] {
            let schema = Schema::new(vec![Field::new("x", other.clone(), true)]);
            assert!(!takes(&schema), "{other}");
        }
        let wide: Vec<Field> = (0..=MAX_FIELDS)
            .map(|i| Field::new(format!("c{i}"), DataType::Int64, true))
            .collect();
        assert!(!takes(&Schema::new(wide)));
    }

    /// Small, seeded variations of good lines (bytes replaced, inserted, removed): each
    /// is either handed to Arrow or decoded as Arrow decodes it.
    #[test]
    fn mangled_lines_are_decoded_as_arrow_decodes_them_or_handed_back() {
        let schema = schema();
        let seeds = [
            r#"{"i":1,"s":"a\"b","f":1.5e3,"b":true,"small":-3,"u":7,"must":1,"x":[{"y":null}]}"#,
            r#"{"must":-2,"s":"\u00e9 x","f":-0.25,"b":false}"#,
        ];
        let alphabet = b"{}[]\":,.-+0123456789eEtrufalsn \\/u\t\rdDcbA";
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        let mut taken = 0;
        for round in 0..20_000 {
            let mut line = seeds[round % seeds.len()].as_bytes().to_vec();
            for _ in 0..1 + next(3) {
                let at = next(line.len());
                match next(3) {
                    0 => line[at] = alphabet[next(alphabet.len())],
                    1 => line.insert(at, alphabet[next(alphabet.len())]),
                    _ => {
                        line.remove(at);
                    }
                }
            }
            let Ok(line) = String::from_utf8(line) else {
                continue;
            };
            if line.contains('\n') {
                continue;
            }
            taken += usize::from(agrees_with_arrow(&schema, &line));
        }
        // The variations are not all refused (that would test nothing).
        assert!(taken > 1_000, "only {taken} taken");
    }
}
