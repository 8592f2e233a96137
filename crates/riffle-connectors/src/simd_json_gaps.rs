//! What simd-json 0.17 takes that JSON does not, found beside its parse for JSON's fast
//! path (`flat_json.rs`), which hands such a line back to the strict path
//! (`json_check.rs`). Each check is a pass over the line's bytes cheap enough to run on
//! every line, or runs only when the tape shows it may be needed:
//!
//! - raw control bytes inside strings (simd-json takes a TAB there): [`has_control_byte`];
//! - half a UTF-16 surrogate pair (simd-json reads `"\ud800"` as U+0000):
//!   [`has_lone_surrogate`];
//! - a key twice among those outside the schema (the decoder sees the schema's own):
//!   [`has_a_key_twice`];
//! - a long number followed by text that is no JSON (`1234567890123456789x`):
//!   [`may_end_unchecked`], [`long_numbers_end_cleanly`];
//! - an exponent of many digits, which simd-json narrows to 32 bits (`1e4294967296` was
//!   read as 1.0): [`exponents_are_short`].
//!
//! Its number grammar is otherwise JSON's (no leading zero, no `1.`, no bare `-`), which
//! `flat_json.rs`'s tests check.

use simd_json::{Node, StaticNode};

/// Whether simd-json may have read the number `value` without checking that a white
/// space or structural character follows it, or `value` is nested and not looked into.
///
/// simd-json 0.17 reads an integer of 18 digits or more, and a number with a fraction
/// of 19 digits or more, on slower paths that stop at the last digit and never look at
/// the next byte: `1234567890123456789x` was read as 1234567890123456789. An integer of
/// 18 digits is 10^17 or more; a number with a fraction is an F64, whatever its digits.
pub(crate) fn may_end_unchecked(value: &Node<'_>) -> bool {
    const EIGHTEEN_DIGITS: u64 = 100_000_000_000_000_000;
    match value {
        Node::Static(StaticNode::I64(v)) => v.unsigned_abs() >= EIGHTEEN_DIGITS,
        Node::Static(StaticNode::U64(v)) => *v >= EIGHTEEN_DIGITS,
        Node::Static(StaticNode::F64(_)) | Node::Object { .. } | Node::Array { .. } => true,
        _ => false,
    }
}

/// Whether every long number in `line` is a JSON number that ends at white space or a
/// structural character: every number simd-json reads on a slow path (18 digits or
/// more, or 19 in the digits and point before an exponent) covers an 8-byte word (at a
/// multiple of 8) of nothing but digits and points, so only the run of number bytes
/// around such a word is looked at; when that run is not a clean number (it may be
/// text in a string), the whole line is, by [`numbers_end_cleanly`]. Most lines have no
/// such run (floats like `12.5` or shortest-round-trip doubles are shorter).
pub(crate) fn long_numbers_end_cleanly(line: &[u8]) -> bool {
    let is_number_byte =
        |b: &u8| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-');
    let mut checked_to = 0;
    for (i, word) in line.chunks_exact(8).enumerate() {
        let at = i * 8;
        if at < checked_to || !is_word_of_digits(word) {
            continue;
        }
        // A run of 18 or more covers 10 bytes besides the word: 5 on one side. (A
        // float's `40.123456` may cover a word, but is short.)
        let digits_or_points = |bytes: Option<&[u8]>| {
            bytes.is_some_and(|b| b.iter().all(|b| b.is_ascii_digit() || *b == b'.'))
        };
        let long = (at >= 5 && digits_or_points(line.get(at - 5..at)))
            || digits_or_points(line.get(at + 8..at + 13));
        if !long {
            continue;
        }
        let start = line[..at]
            .iter()
            .rposition(|b| !is_number_byte(b))
            .map_or(0, |p| p + 1);
        let end = line[at..]
            .iter()
            .position(|b| !is_number_byte(b))
            .map_or(line.len(), |p| at + p);
        checked_to = end;
        let clean = json_number_length(&line[start..end]) == Some(end - start)
            && matches!(
                line.get(end),
                None | Some(b' ' | b'\t' | b'\r' | b',' | b'}' | b']')
            );
        if !clean {
            return numbers_end_cleanly(line);
        }
    }
    true
}

/// Whether the 8 bytes of `word` are all digits or points.
fn is_word_of_digits(word: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let Ok(bytes) = <[u8; 8]>::try_from(word) else {
        return false;
    };
    let x = u64::from_le_bytes(bytes);
    // A digit is below 10 after `^ 0x30`; the sum is below 0x80 only for those (a carry
    // comes only out of a byte that is no digit, and then the word is not one).
    let y = x ^ (ONES * 0x30);
    let not_digit = (y | y.wrapping_add(ONES * 0x76)) & (ONES * 0x80);
    // A point is a zero byte after `^ 0x2E` (a `/` after a point may pass as one too:
    // then the run is only looked at needlessly).
    let z = x ^ (ONES * 0x2E);
    let point = z.wrapping_sub(ONES) & !z & (ONES * 0x80);
    not_digit & !point == 0
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
/// Whether no number in `line` has an exponent of four digits or more (nor does text
/// that looks like one). simd-json 0.17 reads an exponent of up to about 10^10 and
/// narrows it to 32 bits, so `1e4294967296` was read as 1.0 and `12e-4294967295` as 120;
/// such a number is outside a double's range anyway, and its line is left to the strict
/// path. Looked at only on lines whose tape holds a double or a nested value.
pub(crate) fn exponents_are_short(line: &[u8]) -> bool {
    memchr::memchr2_iter(b'e', b'E', line).all(|at| {
        let after_digit = at > 0 && line[at - 1].is_ascii_digit();
        let rest = &line[at + 1..];
        let rest = match rest.first() {
            Some(b'+' | b'-') => &rest[1..],
            _ => rest,
        };
        !after_digit
            || rest
                .iter()
                .take(4)
                .take_while(|b| b.is_ascii_digit())
                .count()
                < 4
    })
}

pub(crate) fn has_a_key_twice(nodes: &[Node<'_>], at: &[usize]) -> bool {
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
pub(crate) fn has_control_byte(line: &[u8]) -> bool {
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
pub(crate) fn has_lone_surrogate(line: &[u8]) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        for (line, clean) in [
            (&b"{\"a\":1234567890123456789x}"[..], false),
            (b"{\"a\":-1.2345678901234567890x}", false),
            (b"{\"a\":12345678901234567890-3}", false),
            (
                b"{\"a\":1234567890123456789,\"b\":-1.2345678901234567890e-5}",
                true,
            ),
            (b"{\"a\":\"x12345678901234567890y\",\"b\":1}", true),
            (
                b"{\"a\":\"x12345678901234567890y\",\"b\":12345678901234567890x}",
                false,
            ),
            (
                b"{\"auction\":1000,\"price\":12.5,\"t\":\"2015-07-15 00:00:00.000\"}",
                true,
            ),
        ] {
            let text = String::from_utf8_lossy(line);
            assert_eq!(long_numbers_end_cleanly(line), clean, "{text}");
        }
        assert!(is_word_of_digits(b"1234.678") && !is_word_of_digits(b"1234-678"));
        assert!(!is_word_of_digits("123456é".as_bytes()) && !is_word_of_digits(b"1234"));
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
}
