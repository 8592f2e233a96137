//! The JSON-lines reader against DuckDB's `read_json` (explicit column types): seeded
//! lines, good ones and the cases of issue #45 (digits as text in a TIMESTAMP, integers
//! past BIGINT, DECIMALs to round, numbers that are not JSON, a key twice, records
//! broken over two lines, raw control bytes, text after the record, a byte order mark),
//! read by riffle's file source (skipping malformed records, at p1 and p2, on the fast
//! path and on the fallback) and by DuckDB one line at a time. Every line is the same
//! row in both, or refused by both.
//!
//! Where riffle deliberately reads otherwise (documented in docs/connectors.md), the
//! line DuckDB reads is riffle's line translated by that rule, so the rule itself is
//! checked:
//! - a JSON number in a TIMESTAMP is epoch milliseconds (DuckDB refuses it): DuckDB reads
//!   the same instant as a date-time;
//! - a TIMESTAMP outside 1677–2262 is refused (riffle keeps nanoseconds; DuckDB reads it);
//! - a fraction into BIGINT is truncated toward zero, as Flink's JSON format does
//!   (DuckDB rounds): DuckDB reads the truncated integer;
//! - a number into DECIMAL is rounded half-up from its exact decimal value, as Flink does
//!   (DuckDB rounds the nearest double, so 1.005 is 1.00): DuckDB reads it as a string,
//!   which it rounds exactly;
//! - a number with a fraction into VARCHAR keeps its text (`1.50`; DuckDB writes `1.5`):
//!   DuckDB reads the text as a string;
//! - `true` into BIGINT is refused (DuckDB reads 1);
//! - `NaN` and `Infinity` are no JSON and refused (DuckDB reads them into a DOUBLE).

use super::*;
use riffle_core::arrow::array::Array;
use riffle_core::arrow::datatypes::{
    Decimal128Type, Float64Type, TimeUnit, TimestampNanosecondType,
};
use std::fmt::Write as _;

/// A small deterministic generator (xorshift); the seed is printed on a failure.
struct Draw(u64);

impl Draw {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[self.below(from.len() as u64) as usize]
    }
}

/// One value as riffle's line holds it and as DuckDB's line holds it (the same text,
/// unless a deliberate difference translates it), and whether riffle refuses it.
struct Value {
    riffle: String,
    duckdb: String,
    refused_by_riffle: bool,
}

fn same(text: impl Into<String>) -> Value {
    let text = text.into();
    Value {
        duckdb: text.clone(),
        riffle: text,
        refused_by_riffle: false,
    }
}

fn translated(riffle: impl Into<String>, duckdb: impl Into<String>) -> Value {
    Value {
        riffle: riffle.into(),
        duckdb: duckdb.into(),
        refused_by_riffle: false,
    }
}

fn refused_by_riffle(text: impl Into<String>) -> Value {
    Value {
        refused_by_riffle: true,
        ..same(text)
    }
}

/// `millis` since the epoch as `YYYY-MM-DDThh:mm:ss.mmmZ`.
fn date_time(millis: i64) -> String {
    let (days, ms) = (millis.div_euclid(86_400_000), millis.rem_euclid(86_400_000));
    // Days to a civil date (the usual era arithmetic).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}

/// Draws a value of one column; `fast`: only values the fast path takes or refuses, no
/// value of another form (a string in a number column, a fraction in an integer or text
/// column), which Arrow's decoder alone reads and which turns the fast path off.
type Generator = fn(&mut Draw, bool) -> Value;

fn timestamp(d: &mut Draw, _fast: bool) -> Value {
    let millis = d.below(7_000_000_000_000) as i64 - 1_000_000_000_000;
    match d.below(10) {
        0..=4 => same(format!("\"{}\"", date_time(millis))),
        5 => same(format!(
            "\"{}\"",
            date_time(millis).replace('T', " ").replace('Z', "")
        )),
        6 => translated(millis.to_string(), format!("\"{}\"", date_time(millis))),
        7 => same(*d.pick(&["\"2023\"", "\"20230101\"", "\"-5\"", "\"soon\"", "\"\""])),
        8 => refused_by_riffle(*d.pick(&["\"2263-01-01T00:00:00Z\"", "\"1600-06-01T00:00:00Z\""])),
        _ => same("null"),
    }
}

fn bigint(d: &mut Draw, fast: bool) -> Value {
    let magnitude = 10i64.pow(d.below(19) as u32);
    let n = (d.below(u64::MAX) as i64) % magnitude;
    match d.below(10) {
        0..=4 => same(n.to_string()),
        5 | 6 if fast => same(n.to_string()),
        5 => same(format!("\"{n}\"")),
        6 => {
            let (text, truncated) = *d.pick(&[
                ("1.9", "1"),
                ("-1.9", "-1"),
                ("2.5", "2"),
                ("1e3", "1000"),
                ("-0.5", "0"),
                ("12.5e-1", "1"),
                ("9007199254740993.0", "9007199254740993"),
            ]);
            translated(text, truncated)
        }
        7 => same(*d.pick(&[
            "-9223372036854775808",
            "9223372036854775807",
            "-9223372036854775809",
            "9223372036854775808",
            "18446744073709551616",
        ])),
        8 => match d.below(2) {
            0 => same(*d.pick(&["007", "-", "1e", "1.2.3", "\"1.5\"", "\"007\"", "\"x\""])),
            _ => refused_by_riffle("true"),
        },
        _ => same("null"),
    }
}

fn double(d: &mut Draw, fast: bool) -> Value {
    let mantissa = d.below(2_000_000) as i64 - 1_000_000;
    match d.below(10) {
        0..=3 => same(format!("{}", mantissa as f64 / 1000.0)),
        4 => same(format!("{mantissa}e{}", d.below(40) as i64 - 20)),
        5 => same(format!("{}", mantissa.max(1))),
        6 if !fast => same(format!("\"{}\"", mantissa as f64 / 8.0)),
        7 => same(*d.pick(&["1.", "00.5", ".5", "-", "1e", "+1", "0x10"])),
        9 if d.below(4) == 0 => refused_by_riffle(*d.pick(&["NaN", "Infinity", "-Infinity"])),
        8 => same(*d.pick(&[
            "0.1",
            "1e-300",
            "2.2250738585072014e-308",
            "1.7976931348623157e308",
        ])),
        _ => same("null"),
    }
}

fn varchar(d: &mut Draw, fast: bool) -> Value {
    let alphabet = [
        "a",
        "b",
        "Z",
        " ",
        "\\\"",
        "\\\\",
        "\\n",
        "\\u00e9",
        "é",
        "\\ud83d\\ude00",
        "/",
        "1",
    ];
    let text: String = (0..d.below(8)).map(|_| *d.pick(&alphabet)).collect();
    match d.below(10) {
        0..=4 => same(format!("\"{text}\"")),
        5 => same(*d.pick(&["12", "-7", "true", "false", "0"])),
        6 if !fast => {
            let number = *d.pick(&["1.50", "2.0", "1e3", "-0.25"]);
            translated(number, format!("\"{number}\""))
        }
        7 => same(*d.pick(&[
            "-",
            "1e",
            "1.2.3",
            "007",
            "\"a\tb\"",
            "\"a\u{1}b\"",
            "\"\\ud800\"",
        ])),
        _ => same("null"),
    }
}

fn decimal(d: &mut Draw, fast: bool) -> Value {
    let cents = d.below(2_000_000) as i64 - 1_000_000;
    let text = format!(
        "{}{}.{:02}",
        if cents < 0 { "-" } else { "" },
        cents.abs() / 100,
        cents.abs() % 100
    );
    match d.below(10) {
        0..=3 => same(text),
        4 => same(format!("\"{text}\"")),
        // (On a midpoint the fast path hands the line to Arrow's decoder: rarely there,
        // lest the fast path turn off.)
        5 if !fast || d.below(8) == 0 => {
            let number = *d.pick(&[
                "1.005",
                "1.015",
                "0.125",
                "-1.005",
                "2.675",
                "99999999.994",
                "1.999",
            ]);
            translated(number, format!("\"{number}\""))
        }
        5 => same(text),
        6 => same(*d.pick(&["99999999.995", "\"99999999.995\"", "1e8", "1.2.3", "\"x\""])),
        _ => same("null"),
    }
}

/// One seeded file: riffle's lines, DuckDB's lines (as many, line for line), and which
/// lines riffle refuses where DuckDB reads them.
struct Lines {
    riffle: Vec<String>,
    duckdb: Vec<String>,
    refused_by_riffle: Vec<bool>,
}

fn lines(seed: u64, count: usize, fast: bool) -> Lines {
    // (Spread over the state's bits, never zero: xorshift stays at zero.)
    let mut d = Draw(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut out = Lines {
        riffle: Vec::new(),
        duckdb: Vec::new(),
        refused_by_riffle: Vec::new(),
    };
    while out.riffle.len() < count {
        let id = out.riffle.len() + 1;
        let mut values: Vec<(&str, Value)> = Vec::new();
        let columns: [(&str, Generator); 5] = [
            ("ts", timestamp),
            ("n", bigint),
            ("f", double),
            ("s", varchar),
            ("d", decimal),
        ];
        for (name, value) in columns {
            if d.below(5) > 0 {
                values.push((name, value(&mut d, fast)));
            }
        }
        // At most one value that riffle reads otherwise in a line (so the line says
        // which rule it checks): later ones are left out.
        let mut seen_translation = false;
        values.retain(|(_, v)| {
            let differs = v.riffle != v.duckdb || v.refused_by_riffle;
            let keep = !(differs && seen_translation);
            seen_translation |= differs;
            keep
        });
        let record = |text: fn(&Value) -> &str| {
            let mut line = format!("{{\"id\":{id}");
            for (name, value) in &values {
                write!(line, ",\"{name}\":{}", text(value)).unwrap();
            }
            line
        };
        let mut riffle = record(|v| &v.riffle);
        let mut duckdb = record(|v| &v.duckdb);
        let refused = values.iter().any(|(_, v)| v.refused_by_riffle);
        // Damage to the record as a whole.
        match d.below(40) {
            0 => {
                riffle.push_str(",\"id\":0");
                duckdb.push_str(",\"id\":0");
            }
            1 => {
                riffle.push_str("} x");
                duckdb.push_str("} x");
            }
            2 if id > 1 => {
                riffle.insert(0, '\u{feff}');
                duckdb.insert(0, '\u{feff}');
            }
            3 => {
                // Broken over two lines: each half is refused by both.
                for line in [&riffle, &format!("}}{{\"id\":{}}}", id + 1)] {
                    out.riffle.push(line.clone());
                    out.duckdb.push(line.clone());
                    out.refused_by_riffle.push(false);
                }
                continue;
            }
            _ => {}
        }
        if !riffle.ends_with(" x") {
            riffle.push('}');
            duckdb.push('}');
        }
        out.riffle.push(riffle);
        out.duckdb.push(duckdb);
        out.refused_by_riffle.push(refused);
    }
    out
}

/// Each line's row as `ts|n|f|s|d` (see duckdb_read_json.py), or `None` when refused.
type Rows = Vec<Option<String>>;

fn duckdb_rows(lines: &[String], scratch: &Path) -> Rows {
    let python = std::env::var("RIFFLE_DUCKDB_PYTHON").expect(
        "RIFFLE_DUCKDB_PYTHON names a Python with the duckdb package; scripts/test installs it",
    );
    let file = scratch.join("duckdb.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let columns = "{'id': 'BIGINT', 'ts': 'TIMESTAMP', 'n': 'BIGINT', 'f': 'DOUBLE', \
                   's': 'VARCHAR', 'd': 'DECIMAL(10, 2)'}";
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/file_source/duckdb_read_json.py"
    );
    let output = std::process::Command::new(python)
        .arg(script)
        .arg(&file)
        .arg(columns.replace('\'', "\""))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "DuckDB failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rows: Rows = String::from_utf8_lossy(&output.stdout)
        .lines()
        .zip(lines)
        .map(|(answer, line)| {
            // DuckDB 1.4.1 has answered a line it should refuse (a key twice, and
            // digits as a time) with text that is not UTF-8: taken as its refusal.
            if answer == "BAD" {
                eprintln!("DuckDB read text that is not UTF-8 from {line:?}");
            }
            answer.strip_prefix("OK ").map(str::to_string)
        })
        .collect();
    assert_eq!(
        rows.len(),
        lines.len(),
        "DuckDB answered another number of lines"
    );
    rows
}

/// riffle's rows of the file, skipping malformed records, at parallelism `p`; the line
/// of a row is its id.
fn riffle_rows(dir: &Path, lines: usize, fast: bool, p: usize) -> (Rows, u64) {
    let fields = vec![
        Field::new("id", DataType::Int64, false),
        Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
        Field::new("n", DataType::Int64, true),
        Field::new("f", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("d", DataType::Decimal128(10, 2), true),
    ];
    let mut cfg = config(dir, FileFormat::Jsonl, MalformedRecords::Skip);
    cfg.schema = Some(Arc::new(Schema::new(fields)));
    cfg.event_time_column = "id".into();
    // On the fast path's file each line is a batch; the other file is read in batches
    // of 7 (where lines of other forms are common, the fast path turns off).
    cfg.batch_rows = if fast { 1 } else { 7 };
    let (batches, summary) = run(FileSourceFactory::new(cfg).unwrap(), p).unwrap();
    let mut rows: Rows = vec![None; lines];
    for b in &batches {
        let column = |name: &str| b.column_by_name(name).cloned();
        let id = column("id").unwrap();
        let (ts, n, f, s) = (
            column("ts").unwrap(),
            column("n").unwrap(),
            column("f").unwrap(),
            column("s").unwrap(),
        );
        let dec = column("d").unwrap();
        for r in 0..b.num_rows() {
            let cell = |a: &dyn Array, value: &dyn Fn() -> String| match a.is_null(r) {
                true => "N".to_string(),
                false => value(),
            };
            let row = [
                cell(&ts, &|| {
                    (ts.as_primitive::<TimestampNanosecondType>().value(r) / 1000).to_string()
                }),
                cell(&n, &|| n.as_primitive::<Int64Type>().value(r).to_string()),
                cell(&f, &|| {
                    (f.as_primitive::<Float64Type>().value(r).to_bits() as i64).to_string()
                }),
                cell(&s, &|| {
                    s.as_string::<i32>()
                        .value(r)
                        .bytes()
                        .map(|b| format!("{b:02x}"))
                        .collect()
                }),
                cell(&dec, &|| {
                    dec.as_primitive::<Decimal128Type>().value_as_string(r)
                }),
            ]
            .join("|");
            // (A line with its id twice, read with the last value, has no line's id.)
            let id = id.as_primitive::<Int64Type>().value(r);
            let slot = usize::try_from(id - 1)
                .ok()
                .and_then(|i| rows.get_mut(i))
                .unwrap_or_else(|| panic!("riffle read a row of id {id}, which no line has"));
            assert!(slot.is_none(), "line {id} read twice");
            *slot = Some(row);
        }
    }
    (rows, skipped(&summary))
}

#[test]
fn riffle_reads_json_lines_as_duckdb_does_or_both_refuse() {
    let seed = std::env::var("RIFFLE_JSON_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_0045_u64);
    for fast in [true, false] {
        let lines = lines(seed ^ u64::from(!fast), 400, fast);
        let dir = tempfile::tempdir().unwrap();
        let text: String = lines.riffle.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(dir.path().join("a.jsonl"), &text).unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let duckdb = duckdb_rows(&lines.duckdb, scratch.path());
        let path = if fast { "fast path" } else { "all forms" };
        let (mut read, mut refused) = (0, 0);
        for p in [1, 2] {
            let (riffle, skipped_n) = riffle_rows(dir.path(), lines.riffle.len(), fast, p);
            for (i, (ours, theirs)) in riffle.iter().zip(&duckdb).enumerate() {
                let expected = if lines.refused_by_riffle[i] {
                    &None
                } else {
                    theirs
                };
                let (line, duckdb_line) = (&lines.riffle[i], &lines.duckdb[i]);
                let by_rule = lines.refused_by_riffle[i];
                assert_eq!(
                    ours,
                    expected,
                    "seed {seed} ({path}, p{p}) line {}: {line:?} (DuckDB read {duckdb_line:?}, \
                     refused by riffle by rule: {by_rule})",
                    i + 1
                );
            }
            let kept = riffle.iter().flatten().count();
            assert_eq!(
                kept as u64 + skipped_n,
                lines.riffle.len() as u64,
                "{path} p{p}"
            );
            (read, refused) = (kept, lines.riffle.len() - kept);
        }
        // The lines are neither all read nor all refused (that would test little).
        eprintln!("{path}: {read} lines read alike, {refused} refused by both (seed {seed})");
        assert!(
            read > 100 && refused > 50,
            "{path}: {read} read, {refused} refused"
        );
    }
}
