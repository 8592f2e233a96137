//! JSON lines of flat records decoded through simd-json's tape: the fast path of
//! [`crate::decode::RecordDecoder`] for JSON.
//!
//! Arrow's JSON decoder spent about two thirds of a JSON file source's time (its tape
//! alone a third); simd-json builds its tape of a line in about half that time. This
//! decoder takes only the common form of a record: one object per line, each key at
//! most once, its value null or of the field's own JSON type (a number for a number
//! column, a string for a VARCHAR one; an integer or a boolean for a VARCHAR is taken as
//! its text, as Arrow takes it, and an object or array as its text, as `json_text.rs`
//! writes it; a TIMESTAMP column is handed over as text, an integer's
//! digits or a string that is not digits; a DECIMAL column takes a number where its f64
//! tells the value its text rounds to, and a decimal string). It hands any other batch back, and the strict
//! check (`json_check.rs`) and Arrow's decoder decode it or name the error, so a record
//! decodes alike on either path (the tests below hold the two to that).
//!
//! simd-json takes some text JSON does not (raw control bytes inside strings, half a
//! surrogate pair, a long number followed by junk): `simd_json_gaps.rs` finds those
//! lines, which are handed back, as is a record with a key twice. A line holding any
//! byte below 0x20 is handed back (a TAB between tokens is JSON, but rare). Its number
//! parser otherwise holds to JSON's grammar (no leading zero, no `1.`, no bare `-`),
//! which the tests below check.

use crate::json_check::is_signed_digits;
use crate::json_numbers::{decimal, decimal_of_double, decimal_of_integer};
use crate::json_text::write_from_tape;
use crate::simd_json_gaps::{
    exponents_are_short, has_a_key_twice, has_control_byte, has_lone_surrogate,
    long_numbers_end_cleanly, may_end_unchecked,
};
use riffle_core::arrow::array::{
    ArrayBuilder, ArrayRef, ArrowPrimitiveType, BooleanBuilder, Decimal128Builder,
    PrimitiveBuilder, StringBuilder,
};
use riffle_core::arrow::datatypes::{
    DataType, Date32Type, Field, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
    Int8Type, Schema, SchemaRef, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use riffle_core::RecordBatch;
use simd_json::{Buffers, Node, StaticNode};
use std::fmt::Write;
use std::sync::Arc;

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
    /// what follows it, or a nested value not looked into (see
    /// `simd_json_gaps::may_end_unchecked`).
    unchecked_number: bool,
    /// Per field, the last record that named it (numbered by `records_seen`, from 1): which
    /// fields a record named, for any number of fields, without clearing per record.
    named_by: Vec<u32>,
    records_seen: u32,
    /// The text of an object or array read into a VARCHAR column.
    nested: String,
}

impl FlatJsonDecoder {
    /// A decoder for records of `schema`; `None` when a field's type is one this decoder
    /// leaves to Arrow's.
    pub(crate) fn new(schema: &SchemaRef) -> Option<Self> {
        let fields = schema.fields();
        let taken = fields
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
            named_by: vec![0; fields.len()],
            records_seen: 0,
            nested: String::new(),
        })
    }

    /// The `rows` records of `text`, one per line; `None` when a line is not of the form
    /// this decoder takes (or `text` holds another number of lines).
    #[cfg(test)]
    pub(crate) fn decode(&mut self, text: &[u8], rows: usize) -> Option<RecordBatch> {
        match self.decode_prefix(text, 0, rows) {
            FlatDecoded::All(batch) => Some(batch),
            _ => None,
        }
    }

    /// The `rows` records of `text` from byte `from` on, one per line, or those before
    /// the first line this decoder does not take. Blank lines are no records (as for
    /// Arrow's decoder). Calls for one text go on from `from` > 0 after a line not
    /// taken: the text is copied once, at `from` = 0.
    pub(crate) fn decode_prefix(&mut self, text: &[u8], from: usize, rows: usize) -> FlatDecoded {
        // (Past a line not taken, lines of another form may follow: grow as needed.)
        let capacity = if from == 0 { rows } else { rows.min(1024) };
        let Some(mut columns) = self
            .types
            .iter()
            .map(|t| Column::new(t, capacity))
            .collect::<Option<Vec<Column>>>()
        else {
            return FlatDecoded::Not;
        };
        let mut copy = std::mem::take(&mut self.text);
        if from == 0 || copy.len() != text.len() {
            copy.clear();
            copy.extend_from_slice(text);
        }
        let mut tape = self.tape.take().unwrap_or_else(simd_json::tape::Tape::null);
        let mut decoded = 0;
        let mut rest = copy.get_mut(from..).unwrap_or_default();
        // Where the line not taken starts, if one is not.
        let mut odd = None;
        let mut line_start = from;
        while !rest.is_empty() {
            let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
            if rest[..end]
                .iter()
                .all(|b| matches!(b, b' ' | b'\t' | b'\r'))
            {
                rest = rest.get_mut(end + 1..).unwrap_or_default();
                line_start += end + 1;
                continue;
            }
            if decoded == rows {
                odd = Some(line_start); // more lines than records: no prefix to keep
                break;
            }
            let (line, after) = rest.split_at_mut(end);
            rest = after.get_mut(1..).unwrap_or_default();
            // (simd-json parses `line` in place: its text as read is `original`.)
            let original = text.get(line_start..line_start + end).unwrap_or_default();
            let mut line_tape = tape.reset();
            let taken = !has_control_byte(line)
                && !has_lone_surrogate(line)
                && simd_json::fill_tape(line, &mut self.buffers, &mut line_tape).is_ok()
                && self.record(&line_tape.0, &mut columns)
                && (!self.unchecked_number
                    || (long_numbers_end_cleanly(original) && exponents_are_short(original)));
            tape = line_tape.reset();
            if !taken {
                odd = Some(line_start);
                break;
            }
            line_start += end + 1;
            decoded += 1;
        }
        self.tape = Some(tape);
        self.text = copy;
        if decoded == rows && odd.is_none() {
            let arrays: Vec<ArrayRef> = columns.iter_mut().map(Column::finish).collect();
            return match RecordBatch::try_new(self.schema.clone(), arrays) {
                Ok(batch) => FlatDecoded::All(batch),
                Err(_) => FlatDecoded::Not,
            };
        }
        match odd {
            Some(at) if decoded < rows => {
                // A column may hold part of the line not taken: keep the rows before it.
                let arrays: Vec<ArrayRef> = columns
                    .iter_mut()
                    .map(|c| c.finish().slice(0, decoded))
                    .collect();
                match RecordBatch::try_new(self.schema.clone(), arrays) {
                    Ok(batch) => FlatDecoded::UpTo { batch, at },
                    Err(_) => FlatDecoded::Not,
                }
            }
            _ => FlatDecoded::Not,
        }
    }

    /// Appends the record of one line's tape to `columns`; false when it is not of the
    /// form taken (`columns` are then part-way through a row, and dropped).
    fn record(&mut self, nodes: &[Node<'_>], columns: &mut [Column]) -> bool {
        let Some(Node::Object { len, .. }) = nodes.first() else {
            return false;
        };
        self.other_keys.clear();
        self.unchecked_number = false;
        self.records_seen = match self.records_seen.checked_add(1) {
            Some(r) => r,
            None => {
                self.named_by.fill(0);
                1
            }
        };
        let record = self.records_seen;
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
            if self.named_by[i] == record {
                return false; // named twice: a malformed record
            }
            self.named_by[i] = record;
            guess = i + 1;
            let appended = match value {
                Node::Static(StaticNode::Null) if self.nullable[i] => {
                    columns[i].append_null();
                    true
                }
                Node::Static(value) => columns[i].append(value),
                Node::String(text) => columns[i].append_text(text),
                Node::Object { count, .. } | Node::Array { count, .. } => {
                    let nested = nodes.get(at - 1..at + count).unwrap_or_default();
                    at += count;
                    self.nested.clear();
                    write_from_tape(nested, &mut self.nested)
                        && columns[i].append_nested_text(&self.nested)
                }
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
            if self.named_by[i] != record {
                if !self.nullable[i] {
                    return false;
                }
                column.append_null();
            }
        }
        true
    }
}

/// What [`FlatJsonDecoder::decode_prefix`] took.
pub(crate) enum FlatDecoded {
    /// Every record.
    All(RecordBatch),
    /// The records before the first line it does not take, which starts at byte `at` of
    /// the text.
    UpTo { batch: RecordBatch, at: usize },
    /// Nothing: the text holds more lines than records, or the batch failed.
    Not,
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
    /// A REAL: the f64 simd-json read, narrowed where that rounds as Arrow's parse of
    /// the text straight to f32 does ([`f32_as_parsed`]).
    Float32(PrimitiveBuilder<Float32Type>),
    Boolean(BooleanBuilder),
    Utf8(StringBuilder),
    /// A DECIMAL: a number's value rounded half-up to the scale, as `json_numbers.rs`
    /// reads the text, where the tape tells it ([`decimal_of_double`]); a string read as
    /// its text is.
    Decimal {
        builder: Decimal128Builder,
        precision: u8,
        scale: i8,
    },
    /// A DATE: a string parsed by Arrow's own parser (as its decoder parses it), or an
    /// integer (days since 1970-01-01, as Arrow's decoder takes a number).
    Date32(PrimitiveBuilder<Date32Type>),
    /// A TIMESTAMP column as its text: an integer's digits (epoch milliseconds) or a
    /// string that is not digits (a date-time; digits as text are malformed).
    DateTime(StringBuilder),
}

impl Column {
    /// A column of `rows` rows of `data_type`; `None` for a type this decoder leaves
    /// to Arrow's.
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
            DataType::Float32 => Column::Float32(PrimitiveBuilder::with_capacity(rows)),
            DataType::Boolean => Column::Boolean(BooleanBuilder::with_capacity(rows)),
            DataType::Utf8 => Column::Utf8(StringBuilder::with_capacity(rows, rows * 16)),
            DataType::Date32 => Column::Date32(PrimitiveBuilder::with_capacity(rows)),
            &DataType::Decimal128(precision, scale) if scale >= 0 => Column::Decimal {
                builder: Decimal128Builder::with_capacity(rows)
                    .with_precision_and_scale(precision, scale)
                    .ok()?,
                precision,
                scale,
            },
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
            Column::Float32(b) => b,
            Column::Boolean(b) => b,
            Column::Date32(b) => b,
            Column::Decimal { builder, .. } => builder,
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
            Column::Float32(b) => b.append_null(),
            Column::Boolean(b) => b.append_null(),
            Column::Date32(b) => b.append_null(),
            Column::Decimal { builder, .. } => builder.append_null(),
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
            Column::Date32(b) => append_integer(b, value),
            Column::Float64(b) => number(value, negative_zero)
                .map(|v| b.append_value(v))
                .is_some(),
            Column::Float32(b) => number(value, negative_zero)
                .and_then(f32_as_parsed)
                .map(|x| b.append_value(x))
                .is_some(),
            Column::Boolean(b) => match *value {
                StaticNode::Bool(v) => {
                    b.append_value(v);
                    true
                }
                _ => false,
            },
            Column::Decimal {
                builder,
                precision,
                scale,
            } => {
                let (p, s) = (*precision, *scale);
                let value = match *value {
                    StaticNode::I64(v) => decimal_of_integer(v.into(), p, s),
                    StaticNode::U64(v) => decimal_of_integer(v.into(), p, s),
                    StaticNode::F64(v) => decimal_of_double(v, p, s),
                    _ => None,
                };
                value.map(|v| builder.append_value(v)).is_some()
            }
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

    /// Appends the text of a JSON object or array (`json_text.rs`); false when this
    /// column is no VARCHAR.
    fn append_nested_text(&mut self, text: &str) -> bool {
        match self {
            Column::Utf8(b) => {
                b.append_value(text);
                true
            }
            _ => false,
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
            Column::Decimal {
                builder,
                precision,
                scale,
                ..
            } => decimal(text, *precision, *scale)
                .map(|v| builder.append_value(v))
                .is_some(),
            Column::Date32(b) => {
                use riffle_core::arrow::compute::kernels::cast_utils::Parser;
                Date32Type::parse(text).map(|d| b.append_value(d)).is_some()
            }
            _ => false,
        }
    }
}

/// A JSON number as the nearest f64 (an integer converts as Arrow's parse of its text
/// rounds); `None` for what is not a number, or an integer 0 (it may have been `-0`).
fn number(value: &StaticNode, negative_zero: bool) -> Option<f64> {
    match *value {
        StaticNode::I64(v) if !negative_zero => Some(v as f64),
        StaticNode::U64(v) => Some(v as f64),
        StaticNode::F64(v) => Some(v),
        _ => None,
    }
}

/// The f32 nearest a JSON number, from `v`, the f64 nearest it, where rounding twice
/// (to f64, then to f32) surely gives what rounding once does (Arrow parses the text
/// straight to f32); `None` where it might not, for the record to go to Arrow.
///
/// The two differ only when a midpoint between neighbouring f32 values lies between
/// the number and `v` (or is `v`): `v` is within half an f64 step of the number, so a
/// midpoint further than two steps from `v` cannot be. Outside f32's normal range the
/// steps differ; those numbers go to Arrow too.
fn f32_as_parsed(v: f64) -> Option<f32> {
    if v == 0.0 {
        return Some(v as f32);
    }
    let x = v as f32;
    if !x.is_normal() || x.abs() == f32::MAX {
        return None;
    }
    let near = f64::from(x);
    if near == v {
        return Some(x);
    }
    let other = f64::from(if v > near { x.next_up() } else { x.next_down() });
    let midpoint = (near + other) / 2.0; // exact: f32 values have 24 significant bits
    let step = (f64::from_bits(v.abs().to_bits() + 1) - v.abs()).abs();
    ((v - midpoint).abs() > 2.0 * step).then_some(x)
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
    use riffle_core::arrow::array::{Array, AsArray};
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
            r#"{"must":13,"s":{ "a" : [1, {"b":null}, -0.5e1], "c":"\u00e9\n" },"i":2}"#,
            r#"{"must":14,"s":[]}"#,
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
            r#"{"must":1,"f":123456789012345678901234567890}"#,
            r#"{"must":1,"f":1e4294967296}"#,
            r#"{"must":1,"f":12e-4294967295}"#,
            r#"{"must":1,"s":[1e4294967296]}"#,
            r#"{"must":1,"s":"x","y":[1E+4294967297]}"#,
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
            r#"{"must":1,"s":{"a":1,"a":2}}"#,
            r#"{"must":1,"s":[{"b":[],"b":{}}]}"#,
            r#"{"must":1,"i":{"a":1}}"#,
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
    fn schemas_with_other_types_are_left_to_arrow() {
        assert!(takes(&schema()));
        for other in [
            DataType::Decimal128(10, -2),
            DataType::LargeUtf8,
            DataType::List(Arc::new(Field::new("item", DataType::Int64, true))),
        ] {
            let schema = Schema::new(vec![Field::new("x", other.clone(), true)]);
            assert!(!takes(&schema), "{other}");
        }
    }

    #[test]
    fn dates_decode_as_arrow_decodes_them_and_the_rest_is_handed_back() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("d", DataType::Date32, true),
            Field::new("n", DataType::Int64, true),
        ]));
        for line in [
            r#"{"d":"2026-12-06","n":1}"#,
            r#"{"d":"1970-01-01"}"#,
            r#"{"d":"1969-12-31","n":2}"#,
            r#"{"d":"0001-01-01"}"#,
            r#"{"d":"9999-12-31"}"#,
            r#"{"d":"2024-02-29"}"#,
            r#"{"d":20000}"#,
            r#"{"d":-1}"#,
            r#"{"d":null,"n":3}"#,
            r#"{"n":4}"#,
        ] {
            assert!(agrees_with_arrow(&schema, line), "not taken: {line}");
        }
        // Not dates, or not as this decoder reads them: each is left to Arrow (which
        // refuses or reads them its own way), never decoded otherwise.
        for line in [
            r#"{"d":"2023-02-29"}"#,
            r#"{"d":"2026-13-01"}"#,
            r#"{"d":"06/12/2026"}"#,
            r#"{"d":""}"#,
            r#"{"d":"2026-12-06T10:00:00"}"#,
            r#"{"d":1.5}"#,
            r#"{"d":true}"#,
            r#"{"d":9999999999}"#,
        ] {
            agrees_with_arrow(&schema, line);
        }
    }

    #[test]
    fn decimals_decode_as_their_text_reads_and_midpoints_are_handed_back() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("d", DataType::Decimal128(10, 2), true),
            Field::new("n", DataType::Int64, true),
        ]));
        for line in [
            r#"{"d":12.34,"n":1}"#,
            r#"{"d":-0.5}"#,
            r#"{"d":7}"#,
            r#"{"d":-0}"#,
            r#"{"d":-0.0}"#,
            r#"{"d":1.006}"#,
            r#"{"d":1e3}"#,
            r#"{"d":99999999.99}"#,
            r#"{"d":"1.5"}"#,
            r#"{"d":"-1.005"}"#,
            r#"{"d":".5"}"#,
            r#"{"d":null,"n":2}"#,
            r#"{"n":3}"#,
        ] {
            assert!(agrees_with_arrow(&schema, line), "not taken: {line}");
        }
        // On or near a midpoint of the scale (the f64 cannot tell which side the text
        // is), past the precision, past what a double tells apart, or no number: left
        // to Arrow, which reads the text or names the error.
        for line in [
            r#"{"d":1.005}"#,
            r#"{"d":2.675}"#,
            r#"{"d":1.00499999999999999999}"#,
            r#"{"d":99999999.995}"#,
            r#"{"d":100000000}"#,
            r#"{"d":1234567890123.25}"#,
            r#"{"d":1e4294967296}"#,
            r#"{"d":-1.5e4294967297}"#,
            r#"{"d":true}"#,
            r#"{"d":"x"}"#,
            r#"{"d":"1e"}"#,
        ] {
            assert!(!agrees_with_arrow(&schema, line), "taken: {line}");
        }
        // Seeded prices of two to four places: each taken is decoded as Arrow's reads
        // its text, and most are taken.
        let mut taken = 0;
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let places = 2 + (state >> 50) % 3;
            let cents = state % 10u64.pow(8);
            let line = format!(r#"{{"d":{cents}e-{places}}}"#);
            taken += usize::from(agrees_with_arrow(&schema, &line));
        }
        assert!(taken > 17_000, "{taken} of 20000 taken");
    }

    #[test]
    fn reals_decode_as_arrow_parses_them_straight_to_f32() {
        let schema = Arc::new(Schema::new(vec![Field::new("r", DataType::Float32, true)]));
        for line in [
            r#"{"r":1.5}"#,
            r#"{"r":-2}"#,
            r#"{"r":0.1}"#,
            r#"{"r":-0.0}"#,
            r#"{"r":3.4028234e38}"#,
            r#"{"r":16777217}"#,
            r#"{"r":1e-30}"#,
            r#"{"r":123456.789}"#,
            r#"{"r":null}"#,
        ] {
            agrees_with_arrow(&schema, line);
        }
        // 1 + 2^-24 lies on the midpoint of 1 and the next f32 (ties to even: 1), and the
        // number just above it rounds up straight to f32 but to that midpoint as f64,
        // then down: both are left to Arrow, never decoded otherwise.
        for line in [
            r#"{"r":1.000000059604644775390625}"#,
            r#"{"r":1.00000005960464477539062500000000001}"#,
            r#"{"r":1.00000005960464477539062499999999999}"#,
        ] {
            assert!(!agrees_with_arrow(&schema, line), "taken: {line}");
        }
        // Many numbers are taken, each as Arrow parses it (integers above 2^24 that lie
        // on a midpoint, as a quarter of the `e-0` ones here do, go to Arrow).
        let mut taken = 0;
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mantissa = state % 100_000_000;
            let exponent = (state >> 40) % 30;
            let line = format!(r#"{{"r":{mantissa}e-{exponent}}}"#);
            taken += usize::from(agrees_with_arrow(&schema, &line));
        }
        assert!(taken > 19_500, "{taken} of 20000 taken");
    }

    #[test]
    fn wide_records_are_taken_and_a_field_named_twice_is_handed_back() {
        let fields: Vec<Field> = (0..100)
            .map(|i| Field::new(format!("c{i}"), DataType::Int64, true))
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let mut flat = FlatJsonDecoder::new(&schema).expect("a wide schema is taken");
        let line = |skip: usize| -> String {
            let values: Vec<String> = (0..100)
                .filter(|&i| i != skip)
                .map(|i| format!("\"c{i}\":{i}"))
                .collect();
            format!("{{{}}}\n", values.join(","))
        };
        let text = format!("{}{}", line(99), line(70));
        let batch = flat.decode(text.as_bytes(), 2).expect("taken");
        let column = |i: usize| batch.column(i).as_primitive::<Int64Type>().clone();
        assert_eq!(column(80).values(), &[80, 80]);
        assert!(column(99).is_null(0) && column(70).is_null(1));
        assert!(column(70).is_valid(0) && column(99).is_valid(1));
        let twice = "{\"c65\":1,\"c3\":2,\"c65\":3}\n";
        assert!(flat.decode(twice.as_bytes(), 1).is_none());
    }

    /// Small, seeded variations of good lines (bytes replaced, inserted, removed): each
    /// is either handed to Arrow or decoded as Arrow decodes it.
    #[test]
    fn mangled_lines_are_decoded_as_arrow_decodes_them_or_handed_back() {
        let schema = schema();
        let seeds = [
            r#"{"i":1,"s":"a\"b","f":1.5e3,"b":true,"small":-3,"u":7,"must":1,"x":[{"y":null}]}"#,
            r#"{"must":-2,"s":"\u00e9 x","f":-0.25,"b":false}"#,
            r#"{"must":3,"s":{"k":[1,2.5e-3,"x\"y",true],"e":{},"n":null},"i":-1}"#,
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
