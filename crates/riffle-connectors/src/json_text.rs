//! A JSON object or array in a VARCHAR column, read as the text Flink's JSON format
//! gives it: Flink reads the value into a Jackson tree and writes the tree back, so the
//! text is compact (no white space), keys keep their order, strings are escaped as
//! Jackson escapes them (`"`, `\`, control characters; nothing else), an integer is its
//! digits (`-0` is `0`), and a number with a fraction or exponent is a double written as
//! Java writes one (`1.5`, `1000.0`, `1.0E-4`, `1.2345678912345679E8`).
//!
//! riffle differs from Flink in two places: an object that names a key twice is refused
//! (Flink keeps the last value), as a record that names a key twice is; and a value
//! nested deeper than [`DEPTH_MAX`] levels is refused (Flink's Jackson takes 1000).
//!
//! Two writers give the same text: [`nested_text`] from the value's JSON text (the strict
//! path, `json_check.rs`), and [`write_from_tape`] from simd-json's tape (the fast path,
//! `flat_json.rs`), which declines what the tape cannot tell: an integer past 2^63,
//! which simd-json reads as a double.

use crate::json_numbers::DecimalText;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use simd_json::{Node, StaticNode};
use std::fmt::{self, Write};

/// The text Flink reads into a STRING column from the JSON object or array `raw` (JSON
/// text that serde_json has checked).
///
/// # Errors
/// An object in `raw` names a key twice: the message names the key.
pub(crate) fn nested_text(raw: &str) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    write_raw(raw, &mut out, 1)?;
    Ok(out)
}

/// The deepest nesting read into a VARCHAR (the writers recurse once a level; serde_json
/// holds its own parsing to the same depth).
pub(crate) const DEPTH_MAX: usize = 128;

/// Writes `raw`, the value at nesting level `depth` (the column's value is level 1).
fn write_raw(raw: &str, out: &mut String, depth: usize) -> Result<(), String> {
    match raw.as_bytes().first() {
        Some(b'{' | b'[') if depth > DEPTH_MAX => Err(format!(
            "the value is nested deeper than {DEPTH_MAX} levels"
        )),
        Some(b'{' | b'[') => {
            let mut parser = serde_json::Deserializer::from_str(raw);
            parser
                .deserialize_any(Nested { out, depth })
                .map_err(|e| e.to_string())
        }
        Some(b'"') => {
            let text: String = serde_json::from_str(raw).map_err(|e| e.to_string())?;
            write_string(&text, out);
            Ok(())
        }
        Some(b't' | b'f' | b'n') => {
            out.push_str(raw);
            Ok(())
        }
        _ => write_number(raw, out),
    }
}

/// A number's text as Jackson writes it back: an integer's digits, or a double.
fn write_number(raw: &str, out: &mut String) -> Result<(), String> {
    if raw.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        let value: f64 = raw.parse().map_err(|_| format!("`{raw}` is no number"))?;
        match value.is_finite() {
            true => write_java_double(value, out),
            // (Jackson writes a double past its range as a string.)
            false if value > 0.0 => out.push_str("\"Infinity\""),
            false => out.push_str("\"-Infinity\""),
        }
    } else if raw == "-0" {
        out.push('0');
    } else {
        out.push_str(raw); // a JSON integer has one spelling
    }
    Ok(())
}

/// Writes each member of an object or array, from its own JSON text.
struct Nested<'o> {
    out: &'o mut String,
    /// The level of this object or array.
    depth: usize,
}

impl<'de> Visitor<'de> for Nested<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object or array")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys: Vec<String> = Vec::new();
        self.out.push('{');
        while let Some(key) = map.next_key::<String>()? {
            if keys.contains(&key) {
                return Err(de::Error::custom(format!(
                    "the key `{key}` appears twice in an object"
                )));
            }
            let value: &RawValue = map.next_value()?;
            if !keys.is_empty() {
                self.out.push(',');
            }
            write_string(&key, self.out);
            self.out.push(':');
            write_raw(value.get(), self.out, self.depth + 1).map_err(de::Error::custom)?;
            keys.push(key);
        }
        self.out.push('}');
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.out.push('[');
        let mut first = true;
        while let Some(value) = seq.next_element::<&RawValue>()? {
            if !first {
                self.out.push(',');
            }
            first = false;
            write_raw(value.get(), self.out, self.depth + 1).map_err(de::Error::custom)?;
        }
        self.out.push(']');
        Ok(())
    }
}

/// Writes the object or array at the start of `nodes` (one value of a simd-json tape:
/// its node and the `count` nodes inside it); false where the tape cannot tell the text
/// Flink gives (a double of 2^63 or more may have been an integer's digits) or an
/// object names a key twice.
pub(crate) fn write_from_tape(nodes: &[Node<'_>], out: &mut String) -> bool {
    write_node(nodes, out, 1).is_some()
}

/// Writes the value at the start of `nodes`; how many nodes it took.
fn write_node(nodes: &[Node<'_>], out: &mut String, depth: usize) -> Option<usize> {
    match *nodes.first()? {
        Node::Object { .. } | Node::Array { .. } if depth > DEPTH_MAX => None,
        Node::Object { len, .. } => {
            out.push('{');
            // (The keys so far, on the stack for objects of up to 16 members.)
            let mut few: [&str; 16] = [""; 16];
            let mut many: Vec<&str> = Vec::new();
            let mut at = 1;
            for member in 0..len {
                let Node::String(key) = *nodes.get(at)? else {
                    return None;
                };
                if few[..member.min(few.len())].contains(&key) || many.contains(&key) {
                    return None;
                }
                match few.get_mut(member) {
                    Some(slot) => *slot = key,
                    None => many.push(key),
                }
                if member > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                at += 1 + write_node(nodes.get(at + 1..)?, out, depth + 1)?;
            }
            out.push('}');
            Some(at)
        }
        Node::Array { len, .. } => {
            out.push('[');
            let mut at = 1;
            for element in 0..len {
                if element > 0 {
                    out.push(',');
                }
                at += write_node(nodes.get(at..)?, out, depth + 1)?;
            }
            out.push(']');
            Some(at)
        }
        Node::String(text) => {
            write_string(text, out);
            Some(1)
        }
        Node::Static(value) => {
            match value {
                StaticNode::Null => out.push_str("null"),
                StaticNode::Bool(v) => write!(out, "{v}").ok()?,
                StaticNode::I64(v) => out.push_str(itoa::Buffer::new().format(v)),
                StaticNode::U64(v) => out.push_str(itoa::Buffer::new().format(v)),
                StaticNode::F64(v) if v.is_finite() && v.abs() < TWO_TO_63 => {
                    write_java_double(v, out)
                }
                StaticNode::F64(_) => return None,
            }
            Some(1)
        }
    }
}

/// Past this a number simd-json reads as a double may have been written as an integer.
const TWO_TO_63: f64 = 9_223_372_036_854_775_808.0;

/// `text` as a JSON string, escaped as Jackson escapes: `"` and `\`, the control
/// characters as `\b \t \n \f \r` or `\u00XX` (upper-case hex); all else as it is.
fn write_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if c < ' ' => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `value` as Java's `Double.toString` writes it (Java 19 on: the shortest digits that
/// read back as `value`): `1.5`, `1000.0`, `0.001` for 10^-3 <= |value| < 10^7, else
/// `1.0E7`, `1.0E-4`, `1.2345678912345679E8`; zero as `0.0` or `-0.0`.
pub(crate) fn write_java_double(value: f64, out: &mut String) {
    if value == 0.0 {
        out.push_str(if value.is_sign_negative() {
            "-0.0"
        } else {
            "0.0"
        });
        return;
    }
    if value.is_sign_negative() {
        out.push('-');
    }
    // ryu writes the same shortest digits (`1000.0`, `0.0001`, `1.5e-7`). Where one
    // digit is enough, Java writes the two-digit decimal nearest the value that reads
    // back as it: for a normal double that is the same one (its rounding interval is
    // too narrow to hold two), for a subnormal it may not be (4.9E-324, not 5e-324).
    let mut shortest = ryu::Buffer::new();
    let (mut digits, mut exponent) = digits_and_exponent(shortest.format_finite(value.abs()));
    if digits.len == 1 && !value.is_normal() {
        let mut two_digits = ShortText::default();
        let _ = write!(two_digits, "{:.1e}", value.abs());
        if two_digits.as_str().parse::<f64>() == Ok(value.abs()) {
            (digits, exponent) = digits_and_exponent(two_digits.as_str());
        }
    }
    let digits = digits.as_str();
    if (-3..7).contains(&exponent) {
        if exponent >= 0 {
            let whole = exponent as usize + 1;
            if digits.len() <= whole {
                out.push_str(digits);
                out.extend(std::iter::repeat_n('0', whole - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..whole]);
                out.push('.');
                out.push_str(&digits[whole..]);
            }
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exponent - 1) as usize));
            out.push_str(digits);
        }
    } else {
        out.push_str(&digits[..1]);
        out.push('.');
        out.push_str(if digits.len() > 1 { &digits[1..] } else { "0" });
        let _ = write!(out, "E{exponent}");
    }
}

/// The significant digits of a decimal text (`0.0250`, `1.5e-7`, `1000.0`), without
/// leading or trailing zeros (`0` for zero), and the exponent of the first in scientific
/// notation (`25`, -2).
fn digits_and_exponent(text: &str) -> (ShortText, i32) {
    let mut digits = ShortText::default();
    let Some(decimal) = DecimalText::parse(text) else {
        let _ = digits.write_char('0');
        return (digits, 0);
    };
    let (whole, fraction) = (decimal.whole, decimal.fraction);
    let all = whole.iter().chain(fraction);
    let leading_zeros = all.clone().take_while(|&&b| b == b'0').count();
    for &b in all.skip(leading_zeros) {
        let _ = digits.write_char(char::from(b));
    }
    while digits.len > 1 && digits.as_str().ends_with('0') {
        digits.len -= 1;
    }
    if digits.len == 0 {
        let _ = digits.write_char('0');
    }
    // (Exponents of doubles' texts are within ±400: the cast cannot wrap.)
    let exponent = decimal.exponent as i32;
    (
        digits,
        exponent + whole.len() as i32 - 1 - leading_zeros as i32,
    )
}

/// A short ASCII text on the stack (a double's digits and exponent).
#[derive(Default)]
struct ShortText {
    bytes: [u8; 32],
    len: usize,
}

impl ShortText {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

impl Write for ShortText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        self.bytes
            .get_mut(self.len..end)
            .ok_or(fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn java(value: f64) -> String {
        let mut out = String::new();
        write_java_double(value, &mut out);
        out
    }

    #[test]
    fn doubles_are_written_as_java_writes_them() {
        for (value, text) in [
            (1.5, "1.5"),
            (1000.0, "1000.0"),
            (0.01, "0.01"),
            (0.001, "0.001"),
            (0.0001, "1.0E-4"),
            (1e7, "1.0E7"),
            (9_999_999.0, "9999999.0"),
            (123_456_789.123_456_79, "1.2345678912345679E8"),
            (-0.01, "-0.01"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1e300, "1.0E300"),
            (2.5e-300, "2.5E-300"),
            (100.0, "100.0"),
            (0.1, "0.1"),
            (5e-324, "4.9E-324"),
            // 1658206780088562.25: .2 and .3 are as near; Java takes the even digit.
            (1.658_206_780_088_562_3e15, "1.6582067800885622E15"),
            (1e23, "1.0E23"),
        ] {
            assert_eq!(java(value), text, "{value:e}");
        }
    }

    /// Random doubles of every magnitude: the text reads back as the double, in as many
    /// digits as Rust's own shortest text. (Where two texts of that length are as near,
    /// Java takes the one with an even last digit, as ryu does; Rust's `{:e}` may not.)
    #[test]
    fn doubles_keep_their_value_in_the_shortest_digits() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let value = f64::from_bits(state);
            if !value.is_finite() || value == 0.0 {
                continue;
            }
            let text = java(value);
            assert_eq!(text.parse::<f64>(), Ok(value), "{text}");
            let core = format!("{:e}", value.abs());
            let core_digits = core.split('e').next().unwrap().replace('.', "");
            let (ours, _) = text
                .trim_start_matches('-')
                .split_once('E')
                .unwrap_or((&text, ""));
            let ours = ours.trim_start_matches('-').replace('.', "");
            let ours = ours.trim_start_matches('0').trim_end_matches('0');
            if value.is_normal() {
                let theirs = core_digits.trim_end_matches('0');
                assert_eq!(ours.len(), theirs.len(), "{value:e}: {text}");
            }
        }
    }

    #[test]
    fn nested_values_are_written_compactly_as_jackson_writes_them() {
        for (raw, text) in [
            (
                r#"{ "a" : 1 , "b" : [ 1, 2.50, "x" ] }"#,
                r#"{"a":1,"b":[1,2.5,"x"]}"#,
            ),
            (r#"[ ]"#, "[]"),
            (r#"{ }"#, "{}"),
            (
                r#"{"z":1,"a":-0,"n":null,"t":true}"#,
                r#"{"z":1,"a":0,"n":null,"t":true}"#,
            ),
            (
                r#"[1e3,-1.0E-2,12345678901234567890123]"#,
                "[1000.0,-0.01,12345678901234567890123]",
            ),
            (
                r#"{"a":"\u00e9\/\n\u0001\b\f\"\\"}"#,
                "{\"a\":\"é/\\n\\u0001\\b\\f\\\"\\\\\"}",
            ),
            (
                r#"{"k\"ey":{"deep":[[],{}]}}"#,
                r#"{"k\"ey":{"deep":[[],{}]}}"#,
            ),
        ] {
            assert_eq!(nested_text(raw).as_deref(), Ok(text), "{raw}");
        }
        // Past a double's range, as Jackson writes it (Flink 2.3: `"Infinity"`).
        assert_eq!(
            nested_text("[1e400,-1e400,1e4294967296,1e-400]").as_deref(),
            Ok(r#"["Infinity","-Infinity","Infinity",0.0]"#)
        );
        let twice = nested_text(r#"{"a":{"b":1,"b":2}}"#).unwrap_err();
        assert!(twice.contains("`b` appears twice"), "{twice}");
    }

    /// Flink's text with each double written with the shortest digits that read back as
    /// it: Flink on Java 17 (where the answers were recorded) writes a few doubles with
    /// more (`-4.5681424795482998E18` for `-45681424795483e5`; JDK-4511638), Java 19 on
    /// and riffle the shortest.
    fn with_shortest_doubles(flink: &str) -> String {
        let mut out = String::new();
        let (mut in_string, mut escaped) = (false, false);
        let mut chars = flink.chars().peekable();
        while let Some(c) = chars.next() {
            if in_string {
                out.push(c);
                (in_string, escaped) = (escaped || c != '"', !escaped && c == '\\');
                continue;
            }
            if c == '"' {
                in_string = true;
                out.push(c);
                continue;
            }
            if !(c == '-' || c.is_ascii_digit()) {
                out.push(c);
                continue;
            }
            let mut number = String::from(c);
            while let Some(&next) = chars.peek() {
                if !(next.is_ascii_digit() || matches!(next, '.' | 'e' | 'E' | '+' | '-')) {
                    break;
                }
                number.push(next);
                chars.next();
            }
            match number.contains(['.', 'E']) {
                true => write_java_double(number.parse().expect("a double"), &mut out),
                false => out.push_str(&number),
            }
        }
        out
    }

    /// Flink 2.3's STRING for each object or array of `json_text_flink.tsv` (recorded by
    /// scripts/flink-oracle/nested_json.py) is riffle's, on the fast path and on the
    /// strict one, at batch sizes 1 and all (but for the digits of a few doubles, see
    /// [`with_shortest_doubles`]).
    #[test]
    fn objects_and_arrays_read_as_flink_reads_them_on_both_paths() {
        use crate::decode::RecordDecoder;
        use crate::sinks::FileFormat;
        use riffle_core::arrow::array::AsArray;
        use riffle_core::arrow::datatypes::{DataType, Field, Schema};
        use std::sync::Arc;
        let mut longer_doubles = 0;
        let cases: Vec<(&str, String)> = include_str!("json_text_flink.tsv")
            .lines()
            .map(|line| {
                let (value, flink) = line.split_once('\t').expect("value, tab, Flink's");
                let flink: String = serde_json::from_str(flink).expect("Flink's text as JSON");
                let shortest = with_shortest_doubles(&flink);
                longer_doubles += usize::from(shortest != flink);
                (value, shortest)
            })
            .collect();
        assert!(
            longer_doubles < 10,
            "{longer_doubles} of Flink's texts changed"
        );
        assert!(cases.len() >= 300, "{} cases", cases.len());
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
        ]));
        let text: String = cases
            .iter()
            .enumerate()
            .map(|(i, (value, _))| format!("{{\"id\":{i},\"s\":{value}}}\n"))
            .collect();
        let decoder = || RecordDecoder::reading(FileFormat::Jsonl, &schema, None);
        let fast_whole = decoder().decode(text.as_bytes(), cases.len());
        let strict_whole = decoder().decode_without_fast_path(text.as_bytes(), cases.len());
        // Line by line: the fast path's decoder alone (it may hand a line back), and the
        // strict path.
        let mut flat = crate::flat_json::FlatJsonDecoder::new(&schema).expect("flat");
        let mut taken = 0;
        for (i, (value, flink)) in cases.iter().enumerate() {
            let line = format!("{{\"id\":{i},\"s\":{value}}}\n");
            if let Some(batch) = flat.decode(line.as_bytes(), 1) {
                taken += 1;
                let read = batch.column(1).as_string::<i32>().value(0);
                assert_eq!(read, flink, "fast path: {value}");
            }
            let strict = decoder().decode_without_fast_path(line.as_bytes(), 1);
            let batch = strict.unwrap_or_else(|e| panic!("refused {value}: {e}"));
            let read = batch.expect("one row");
            assert_eq!(
                read.column(1).as_string::<i32>().value(0),
                flink,
                "strict path: {value}"
            );
        }
        assert!(
            taken * 10 > cases.len() * 8,
            "the fast path took {taken} of {}",
            cases.len()
        );
        for (path, batch) in [("fast path", fast_whole), ("strict path", strict_whole)] {
            let batch = batch
                .unwrap_or_else(|e| panic!("{path}: {e}"))
                .expect("rows");
            let read = batch.column(1).as_string::<i32>();
            for (i, (value, flink)) in cases.iter().enumerate() {
                assert_eq!(read.value(i), flink, "{path}, whole batch: {value}");
            }
        }
    }

    /// An object of 20 members `k0`…`k19`, then `again` a second time.
    fn wide_object_with(again: &str) -> String {
        let members: Vec<String> = (0..20).map(|i| format!("\"k{i}\":{i}")).collect();
        format!("{{{},\"{again}\":0}}", members.join(","))
    }

    /// The fast path's text of `raw`, or `None` where simd-json refuses it (an integer
    /// past 2^64: that line goes to the strict path) or the tape's writer declines.
    fn from_tape(raw: &str) -> Option<String> {
        let mut bytes = raw.as_bytes().to_vec();
        let tape = simd_json::to_tape(&mut bytes).ok()?;
        let mut out = String::new();
        write_from_tape(&tape.0, &mut out).then_some(out)
    }

    /// `levels` arrays one inside the other.
    fn nested(levels: usize) -> String {
        format!("{}{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn values_nested_past_the_limit_are_refused_without_deep_recursion() {
        assert_eq!(nested_text(&nested(DEPTH_MAX)), Ok(nested(DEPTH_MAX)));
        let deep = nested_text(&nested(DEPTH_MAX + 1)).unwrap_err();
        assert!(deep.contains("nested deeper than 128 levels"), "{deep}");
        // (A million levels would overflow the stack were each written.)
        assert!(nested_text(&nested(1_000_000)).is_err());
        assert_eq!(from_tape(&nested(DEPTH_MAX)), Some(nested(DEPTH_MAX)));
        assert_eq!(from_tape(&nested(DEPTH_MAX + 1)), None);
        assert_eq!(from_tape(&nested(100_000)), None);
    }

    #[test]
    fn the_tape_gives_the_same_text_or_declines() {
        for raw in [
            r#"{ "a" : 1 , "b" : [ 1, 2.50, "x" ] }"#,
            r#"[[],{},[{"a":[null,false]}],-0,0.0001]"#,
            r#"{"a":"\u00e9\/\n\u0001\b\f\"\\","b":{"c":1},"d":2}"#,
            r#"[18446744073709551615,-9223372036854775808,1.5e-300,9.2e18]"#,
            &wide_object_with("k20"),
        ] {
            assert_eq!(from_tape(raw), nested_text(raw).ok(), "{raw}");
        }
        for raw in [
            r#"[12345678901234567890123]"#,
            r#"[1.5e300]"#,
            r#"[9.3e18]"#,
            r#"{"a":1,"a":2}"#,
            r#"[{"b":{},"c":[1],"b":0}]"#,
            &wide_object_with("k3"),
            &wide_object_with("k19"),
        ] {
            assert_eq!(from_tape(raw), None, "{raw}");
        }
    }
}
