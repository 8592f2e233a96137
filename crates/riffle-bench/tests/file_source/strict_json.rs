//! JSON lines that are not JSON, or whose value Arrow's decoder read as something else
//! than the JSON says (issue #45): each is a malformed record named by file, line and
//! field, or skipped and counted, through a job at parallelism 1 and 2, on the fast
//! path (a schema simd-json's decoder takes) and on the fallback (the same schema with
//! a DECIMAL column, which only Arrow's decoder takes). Where Flink defines the value
//! (fractions into BIGINT truncate, DECIMAL rounds half-up) it is read so.

use super::*;
use riffle_core::arrow::array::Array;
use riffle_core::arrow::datatypes::{Decimal128Type, TimeUnit};

/// The two paths a line can take.
#[derive(Clone, Copy, Debug)]
enum Route {
    Fast,
    Fallback,
}

const PATHS: [Route; 2] = [Route::Fast, Route::Fallback];

/// `id BIGINT` (event time, as epoch milliseconds), `ts TIMESTAMP`, `n BIGINT`,
/// `f DOUBLE`, `s VARCHAR`, and on the fallback `d DECIMAL(10, 2)`.
fn strict_config(dir: &Path, path: Route, on_malformed: MalformedRecords) -> FileSourceConfig {
    let mut fields = vec![
        Field::new("id", DataType::Int64, false),
        Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
        Field::new("n", DataType::Int64, true),
        Field::new("f", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
    ];
    if let Route::Fallback = path {
        fields.push(Field::new("d", DataType::Decimal128(10, 2), true));
    }
    let mut cfg = config(dir, FileFormat::Jsonl, on_malformed);
    cfg.schema = Some(Arc::new(Schema::new(fields)));
    cfg.event_time_column = "id".into();
    cfg
}

/// Writes `lines` as `a.jsonl` in a new directory.
fn file_of(lines: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.path().join("a.jsonl"), text).unwrap();
    dir
}

/// Runs `lines` failing on the malformed record at `line` (naming `field`, and saying
/// `says`), and skipping it (keeping the ids of `kept`, `skipped` skipped), at p1 and p2
/// on both paths.
fn refused(
    lines: &[&str],
    line: u64,
    field: Option<&str>,
    says: &str,
    kept: &[i64],
    skipped_n: u64,
) {
    let dir = file_of(lines);
    for path in PATHS {
        for p in [1, 2] {
            let cfg = strict_config(dir.path(), path, MalformedRecords::Fail);
            let err = run(FileSourceFactory::new(cfg).unwrap(), p)
                .expect_err(&format!("{path:?} p{p} read {lines:?}"));
            let text = err.to_string();
            match err {
                RuntimeError::Task {
                    source:
                        Error::MalformedRecord {
                            file,
                            line: at,
                            field: named,
                            message,
                        },
                    ..
                } => {
                    assert!(file.ends_with("a.jsonl"), "{text}");
                    assert_eq!(at, line, "{path:?} p{p}: {text}");
                    assert_eq!(named.as_deref(), field, "{path:?} p{p}: {text}");
                    assert!(message.contains(says), "{path:?} p{p}: {text}");
                }
                other => panic!("{path:?} p{p}: not a malformed record: {other:?}"),
            }
            let cfg = strict_config(dir.path(), path, MalformedRecords::Skip);
            let (batches, summary) = run(FileSourceFactory::new(cfg).unwrap(), p).unwrap();
            assert_eq!(ids(&batches), kept, "{path:?} p{p}: {lines:?}");
            assert_eq!(skipped(&summary), skipped_n, "{path:?} p{p}: {lines:?}");
        }
    }
}

/// A file of a good line (id 1), `bad` (id 2) and a good line (id 3) is refused at line
/// 2, naming `field`.
fn refused_between_good_lines(bad: &str, field: Option<&str>, says: &str) {
    refused(
        &[r#"{"id":1,"s":"a"}"#, bad, r#"{"id":3,"s":"c"}"#],
        2,
        field,
        says,
        &[1, 3],
        1,
    );
}

#[test]
fn digits_as_text_in_a_timestamp_column_are_malformed() {
    for bad in [r#"{"id":2,"ts":"2023"}"#, r#"{"id":2,"ts":"20230101"}"#] {
        refused_between_good_lines(bad, Some("ts"), "is not a date-time");
    }
}

#[test]
fn a_bigint_below_its_range_is_malformed_not_clamped() {
    refused_between_good_lines(
        r#"{"id":2,"n":-9223372036854775809}"#,
        Some("n"),
        "outside the range of BIGINT",
    );
    refused_between_good_lines(
        r#"{"id":2,"n":9223372036854775808}"#,
        Some("n"),
        "outside the range of BIGINT",
    );
}

#[test]
fn numbers_that_are_not_json_are_malformed() {
    for bad in [
        r#"{"id":2,"s":-}"#,
        r#"{"id":2,"s":1e}"#,
        r#"{"id":2,"s":1.2.3}"#,
        r#"{"id":2,"s":007}"#,
        r#"{"id":2,"f":1.}"#,
        r#"{"id":2,"f":00.5}"#,
        r#"{"id":2,"n":007}"#,
    ] {
        refused_between_good_lines(bad, None, "not JSON");
    }
}

#[test]
fn a_key_twice_is_malformed() {
    refused_between_good_lines(r#"{"id":2,"n":1,"n":2}"#, Some("n"), "appears twice");
    refused_between_good_lines(r#"{"id":2,"x":1,"x":2}"#, Some("x"), "appears twice");
}

#[test]
fn a_record_broken_over_two_lines_is_two_malformed_lines() {
    refused(
        &[
            r#"{"id":1,"s":"a"}"#,
            r#"{"id":2,"s":"b""#,
            r#"}{"id":4,"s":"d"}"#,
            r#"{"id":3,"s":"c"}"#,
        ],
        2,
        None,
        "not JSON",
        &[1, 3],
        2,
    );
}

#[test]
fn raw_control_bytes_in_strings_are_malformed() {
    for bad in ["{\"id\":2,\"s\":\"a\tb\"}", "{\"id\":2,\"s\":\"a\u{1}b\"}"] {
        refused_between_good_lines(bad, None, "control character");
    }
}

#[test]
fn text_after_the_record_is_named_so() {
    for bad in [r#"{"id":2} x"#, r#"{"id":2}{"id":9}"#] {
        refused_between_good_lines(bad, None, "text after the record");
    }
}

#[test]
fn a_timestamp_past_2262_is_malformed_naming_the_range() {
    for bad in [
        r#"{"id":2,"ts":"2263-01-01T00:00:00Z"}"#,
        r#"{"id":2,"ts":"1600-01-01 00:00:00"}"#,
        r#"{"id":2,"ts":9300000000000}"#,
    ] {
        refused_between_good_lines(
            bad,
            Some("ts"),
            "1677-09-21 00:12:43.145224192 to 2262-04-11",
        );
    }
}

#[test]
fn a_byte_order_mark_before_the_first_line_is_skipped() {
    let dir = file_of(&["\u{feff}{\"id\":1,\"s\":\"a\"}", r#"{"id":2,"s":"b"}"#]);
    for path in PATHS {
        for p in [1, 2] {
            let cfg = strict_config(dir.path(), path, MalformedRecords::Fail);
            let (batches, _) = run(FileSourceFactory::new(cfg).unwrap(), p).unwrap();
            assert_eq!(ids(&batches), [1, 2], "{path:?} p{p}");
        }
    }
    // Also when the columns are inferred from the file (inference failed on it).
    let mut cfg = config(dir.path(), FileFormat::Jsonl, MalformedRecords::Fail);
    cfg.event_time_column = "id".into();
    let (batches, _) = run(FileSourceFactory::new(cfg).unwrap(), 1).unwrap();
    assert_eq!(ids(&batches), [1, 2]);
    // Anywhere else it is no JSON.
    refused_between_good_lines("\u{feff}{\"id\":2}", None, "not JSON");
}

/// The values of one column over both paths and parallelisms, by id.
fn values_by_id(lines: &[&str], path: Route, column: &str) -> Vec<(i64, String)> {
    let dir = file_of(lines);
    let mut answers = Vec::new();
    for p in [1, 2] {
        let cfg = strict_config(dir.path(), path, MalformedRecords::Fail);
        let (batches, _) = run(FileSourceFactory::new(cfg).unwrap(), p)
            .unwrap_or_else(|e| panic!("{path:?} p{p}: {e}"));
        let mut rows: Vec<(i64, String)> = batches
            .iter()
            .flat_map(|b| {
                let id = b
                    .column_by_name("id")
                    .unwrap()
                    .as_primitive::<Int64Type>()
                    .clone();
                let values = b.column_by_name(column).unwrap().clone();
                (0..b.num_rows()).map(move |r| {
                    let value = match values.is_null(r) {
                        true => "NULL".to_string(),
                        false => match values.data_type() {
                            DataType::Decimal128(_, _) => {
                                values.as_primitive::<Decimal128Type>().value_as_string(r)
                            }
                            _ => values.as_primitive::<Int64Type>().value(r).to_string(),
                        },
                    };
                    (id.value(r), value)
                })
            })
            .collect();
        rows.sort();
        answers.push(rows);
    }
    assert_eq!(answers[0], answers[1], "{path:?}: p1 and p2 differ");
    answers.remove(0)
}

#[test]
fn fractions_into_bigint_truncate_toward_zero_exactly_as_flink_reads_them() {
    let lines = [
        r#"{"id":1,"n":1.9}"#,
        r#"{"id":2,"n":-1.9}"#,
        r#"{"id":3,"n":1e3}"#,
        r#"{"id":4,"n":9007199254740993.0}"#,
        r#"{"id":5,"n":"12"}"#,
        r#"{"id":6,"n":-9223372036854775808}"#,
    ];
    let expected: Vec<(i64, String)> = [1, -1, 1000, 9_007_199_254_740_993, 12, i64::MIN]
        .iter()
        .enumerate()
        .map(|(i, v)| (i as i64 + 1, v.to_string()))
        .collect();
    for path in PATHS {
        assert_eq!(values_by_id(&lines, path, "n"), expected, "{path:?}");
    }
    refused_between_good_lines(r#"{"id":2,"n":"1.5"}"#, Some("n"), "is not an integer");
}

#[test]
fn decimals_round_half_up_and_overflow_is_malformed() {
    let lines = [
        r#"{"id":1,"d":1.005}"#,
        r#"{"id":2,"d":1.999}"#,
        r#"{"id":3,"d":-1.005}"#,
        r#"{"id":4,"d":99999999.994}"#,
        r#"{"id":5,"d":"0.125"}"#,
        r#"{"id":6,"d":null}"#,
    ];
    let expected: Vec<(i64, String)> = ["1.01", "2.00", "-1.01", "99999999.99", "0.13", "NULL"]
        .iter()
        .enumerate()
        .map(|(i, v)| (i as i64 + 1, v.to_string()))
        .collect();
    assert_eq!(values_by_id(&lines, Route::Fallback, "d"), expected);
    let dir = file_of(&[r#"{"id":1,"d":1}"#, r#"{"id":2,"d":99999999.995}"#]);
    let cfg = strict_config(dir.path(), Route::Fallback, MalformedRecords::Fail);
    let err = run(FileSourceFactory::new(cfg).unwrap(), 1).expect_err("overflow");
    let text = err.to_string();
    assert!(
        text.contains("line 2")
            && text.contains("`d`")
            && text.contains("outside the range of DECIMAL(10, 2)"),
        "{text}"
    );
}
