//! Windowed and session aggregates against a plain Vec-based reference over seeded
//! random input, for several batch sizes and with event-time disorder inside the
//! watermark delay. Each failure prints the seed.

use crate::common;

use common::{drive, drive_checkpointed, rows, to_batch, Row};
use riffle_core::arrow::array::{Array, AsArray, BooleanArray};
use riffle_core::arrow::datatypes::{
    DataType, Field, Float64Type, Int64Type, TimestampNanosecondType,
};
use riffle_core::{RecordBatch, StreamSchema};
use riffle_operators::{
    AggregateFunction as F, AggregateSpec, SessionAggregateFactory, WindowAggregateFactory,
    WindowSpec,
};
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

const DELAY_NS: i64 = 200 * 1_000_000;

fn specs() -> Vec<AggregateSpec> {
    vec![
        AggregateSpec::count_star("n"),
        AggregateSpec::new(F::Count, "v", "nv"),
        AggregateSpec::new(F::Sum, "v", "sum"),
        AggregateSpec::new(F::Min, "v", "min"),
        AggregateSpec::new(F::Max, "v", "max"),
        AggregateSpec::new(F::Avg, "v", "avg"),
        AggregateSpec::new(F::CountDistinct, "s", "distinct_s"),
        // FILTER (WHERE v > 0): the count DISTINCT shares its values with distinct_s.
        AggregateSpec::new(F::CountDistinct, "s", "distinct_s_pos").with_filter("pos"),
        AggregateSpec::count_star("n_pos").with_filter("pos"),
        AggregateSpec::new(F::Sum, "v", "sum_pos").with_filter("pos"),
    ]
}

/// The common rows with `pos` (`v > 0`, NULL where `v` is) for the filtered aggregates.
fn schema() -> StreamSchema {
    let mut fields: Vec<Field> = common::schema()
        .user_fields()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("pos", DataType::Boolean, true));
    StreamSchema::with_timestamp(fields)
}

fn with_pos(rows: &[Row]) -> RecordBatch {
    let batch = to_batch(&common::schema(), rows);
    let mut columns = batch.columns().to_vec();
    let time = columns.pop().unwrap();
    let pos: BooleanArray = rows.iter().map(|r| r.v.map(|v| v > 0)).collect();
    columns.push(std::sync::Arc::new(pos));
    columns.push(time);
    RecordBatch::try_new(schema().schema.clone(), columns).unwrap()
}

/// (key, window start, window end) -> the aggregates as comparable text.
type Results = BTreeMap<(i64, i64, i64), String>;

fn summarize(rows: &[&Row]) -> String {
    let vs: Vec<i64> = rows.iter().filter_map(|r| r.v).collect();
    let distinct: HashSet<&str> = rows.iter().map(|r| r.s.as_str()).collect();
    let pos: Vec<&&Row> = rows.iter().filter(|r| r.v.is_some_and(|v| v > 0)).collect();
    let distinct_pos: HashSet<&str> = pos.iter().map(|r| r.s.as_str()).collect();
    let sum_pos = match pos.is_empty() {
        true => "null".to_string(),
        false => pos.iter().filter_map(|r| r.v).sum::<i64>().to_string(),
    };
    let opt = |x: Option<i64>| x.map_or("null".to_string(), |v| v.to_string());
    let avg = if vs.is_empty() {
        "null".to_string()
    } else {
        format!("{:.6}", vs.iter().sum::<i64>() as f64 / vs.len() as f64)
    };
    format!(
        "{} {} {} {} {} {} {} {} {} {}",
        rows.len(),
        vs.len(),
        if vs.is_empty() {
            "null".into()
        } else {
            vs.iter().sum::<i64>().to_string()
        },
        opt(vs.iter().min().copied()),
        opt(vs.iter().max().copied()),
        avg,
        distinct.len(),
        distinct_pos.len(),
        pos.len(),
        sum_pos
    )
}

fn results(batches: &[RecordBatch]) -> Results {
    let mut out = Results::new();
    for b in batches {
        let col = |n: &str| b.column_by_name(n).unwrap().clone();
        let (k, ws, we) = (col("k"), col("window_start"), col("window_end"));
        for r in 0..b.num_rows() {
            let int = |n: &str| {
                let c = col(n);
                if c.is_null(r) {
                    "null".to_string()
                } else {
                    c.as_primitive::<Int64Type>().value(r).to_string()
                }
            };
            let avg = col("avg");
            let avg = if avg.is_null(r) {
                "null".to_string()
            } else {
                format!("{:.6}", avg.as_primitive::<Float64Type>().value(r))
            };
            let text = format!(
                "{} {} {} {} {} {} {} {} {} {}",
                int("n"),
                int("nv"),
                int("sum"),
                int("min"),
                int("max"),
                avg,
                int("distinct_s"),
                int("distinct_s_pos"),
                int("n_pos"),
                int("sum_pos")
            );
            let key = (
                k.as_primitive::<Int64Type>().value(r),
                ws.as_primitive::<TimestampNanosecondType>().value(r),
                we.as_primitive::<TimestampNanosecondType>().value(r),
            );
            assert!(
                out.insert(key, text).is_none(),
                "window {key:?} emitted twice"
            );
        }
    }
    out
}

fn batches_of(input: &[Row], size: usize) -> Vec<(usize, RecordBatch)> {
    input.chunks(size).map(|c| (0, with_pos(c))).collect()
}

fn reference_fixed(input: &[Row], size: i64, slide: i64) -> Results {
    let mut windows: BTreeMap<(i64, i64, i64), Vec<&Row>> = BTreeMap::new();
    for r in input {
        let newest = r.ts - r.ts.rem_euclid(slide);
        let mut start = newest;
        while start > r.ts - size {
            windows
                .entry((r.k, start, start + size))
                .or_default()
                .push(r);
            start -= slide;
        }
    }
    windows
        .into_iter()
        .map(|(k, rows)| (k, summarize(&rows)))
        .collect()
}

/// Each row is in the windows `[s, e)` with `s` the start of its `max`-long window and
/// `e` every multiple of `step` after `s` past the row, up to `s + max`.
fn reference_cumulating(input: &[Row], step: i64, max: i64) -> Results {
    let mut windows: BTreeMap<(i64, i64, i64), Vec<&Row>> = BTreeMap::new();
    for r in input {
        let start = r.ts - r.ts.rem_euclid(max);
        let mut end = start + step;
        while end <= start + max {
            if end > r.ts {
                windows.entry((r.k, start, end)).or_default().push(r);
            }
            end += step;
        }
    }
    windows
        .into_iter()
        .map(|(k, rows)| (k, summarize(&rows)))
        .collect()
}

fn reference_sessions(input: &[Row], gap: i64) -> Results {
    let mut by_key: BTreeMap<i64, Vec<&Row>> = BTreeMap::new();
    for r in input {
        by_key.entry(r.k).or_default().push(r);
    }
    let mut out = Results::new();
    for (k, mut rows) in by_key {
        rows.sort_by_key(|r| r.ts);
        let mut session: Vec<&Row> = Vec::new();
        for r in rows {
            if let Some(last) = session.last() {
                // At most one gap after the previous row continues the session (Flink).
                if r.ts > last.ts + gap {
                    out.insert(
                        (k, session[0].ts, session.last().unwrap().ts + gap),
                        summarize(&session),
                    );
                    session.clear();
                }
            }
            session.push(r);
        }
        out.insert(
            (k, session[0].ts, session.last().unwrap().ts + gap),
            summarize(&session),
        );
    }
    out
}

#[test]
fn tumbling_and_hopping_windows_match_the_reference() {
    for seed in [1u64, 2, 3] {
        let input = rows(seed, 600, 7, 150);
        for (size_ms, slide_ms) in [(500i64, 500i64), (1000, 250)] {
            let (size, slide) = (size_ms * 1_000_000, slide_ms * 1_000_000);
            let expected = reference_fixed(&input, size, slide);
            let window = WindowSpec::Hopping {
                size: Duration::from_millis(size_ms as u64),
                slide: Duration::from_millis(slide_ms as u64),
            };
            let factory = WindowAggregateFactory::new(&schema(), &["k"], window, specs()).unwrap();
            for batch in [1usize, 2, 7, 49, 50, 51, 100] {
                let got = results(&drive(&factory, &batches_of(&input, batch), DELAY_NS, None));
                assert_eq!(
                    got, expected,
                    "seed {seed}, window {size_ms}/{slide_ms} ms, batch {batch}"
                );
            }
        }
    }
}

#[test]
fn cumulating_windows_match_the_reference() {
    for seed in [1u64, 2, 3] {
        let input = rows(seed, 600, 7, 150);
        for (step_ms, max_ms) in [(250i64, 1000i64), (100, 300), (500, 500)] {
            let expected = reference_cumulating(&input, step_ms * 1_000_000, max_ms * 1_000_000);
            let window = WindowSpec::Cumulating {
                step: Duration::from_millis(step_ms as u64),
                max: Duration::from_millis(max_ms as u64),
            };
            let factory = WindowAggregateFactory::new(&schema(), &["k"], window, specs()).unwrap();
            for batch in [1usize, 7, 50, 100] {
                let got = results(&drive(&factory, &batches_of(&input, batch), DELAY_NS, None));
                assert_eq!(
                    got, expected,
                    "seed {seed}, cumulate {step_ms}/{max_ms} ms, batch {batch}"
                );
            }
        }
    }
}

#[test]
fn a_late_row_counts_in_the_cumulating_windows_still_open() {
    let ms = 1_000_000i64;
    let row = |ts: i64| Row {
        k: 1,
        v: Some(1),
        s: "a".into(),
        ts: ts * ms,
    };
    // With no delay, 2500 ms closes [0, 1 s) and [0, 2 s); the row at 500 ms that comes
    // after it is late for those two but counts in [0, 3 s) and [0, 4 s). The row at
    // 4100 ms closes every window of the first 4 seconds; 300 ms after it is dropped.
    let input = vec![row(0), row(2500), row(500), row(4100), row(300), row(4200)];
    let factory = WindowAggregateFactory::new(
        &schema(),
        &["k"],
        WindowSpec::Cumulating {
            step: Duration::from_secs(1),
            max: Duration::from_secs(4),
        },
        specs(),
    )
    .unwrap();
    let got = results(&drive(&factory, &batches_of(&input, 1), 0, None));
    let counts: Vec<(i64, i64, &str)> = got
        .iter()
        .map(|((_, s, e), text)| (*s / ms, *e / ms, text.split(' ').next().unwrap()))
        .collect();
    assert_eq!(
        counts,
        vec![
            (0, 1000, "1"),
            (0, 2000, "1"),
            (0, 3000, "3"),
            (0, 4000, "3"),
            (4000, 5000, "2"),
            (4000, 6000, "2"),
            (4000, 7000, "2"),
            (4000, 8000, "2"),
        ]
    );
}

#[test]
fn rows_exactly_one_gap_apart_are_one_session() {
    let gap = 90_000_000;
    let row = |ts: i64| Row {
        k: 1,
        v: Some(1),
        s: "a".into(),
        ts,
    };
    // 0 and 90 ms touch: one session; 181 ms is more than a gap after 90 ms.
    let input = vec![row(0), row(gap), row(2 * gap + 1_000_000)];
    let factory =
        SessionAggregateFactory::new(&schema(), &["k"], Duration::from_nanos(gap as u64), specs())
            .unwrap();
    let got = results(&drive(&factory, &batches_of(&input, 1), DELAY_NS, None));
    let windows: Vec<(i64, i64)> = got.keys().map(|(_, s, e)| (*s, *e)).collect();
    assert_eq!(
        windows,
        vec![(0, 2 * gap), (2 * gap + 1_000_000, 3 * gap + 1_000_000)]
    );
    assert_eq!(got.values().next().unwrap().split(' ').next(), Some("2"));
}

#[test]
fn session_windows_match_the_reference() {
    for seed in [4u64, 5, 6] {
        // Sparse keys so sessions end; gaps of 60 ms between rows of one key are common.
        let input = rows(seed, 500, 13, 150);
        let gap_ms = 90;
        let expected = reference_sessions(&input, gap_ms * 1_000_000);
        let factory = SessionAggregateFactory::new(
            &schema(),
            &["k"],
            Duration::from_millis(gap_ms as u64),
            specs(),
        )
        .unwrap();
        for batch in [1usize, 7, 50, 100] {
            let got = results(&drive(&factory, &batches_of(&input, batch), DELAY_NS, None));
            assert_eq!(got, expected, "seed {seed}, batch {batch}");
        }
    }
}

#[test]
fn windows_restored_from_a_snapshot_match_an_uninterrupted_run() {
    let input = rows(7, 600, 7, 150);
    let hop = WindowAggregateFactory::new(
        &schema(),
        &["k"],
        WindowSpec::Hopping {
            size: Duration::from_secs(1),
            slide: Duration::from_millis(250),
        },
        specs(),
    )
    .unwrap();
    let cumulate = WindowAggregateFactory::new(
        &schema(),
        &["k"],
        WindowSpec::Cumulating {
            step: Duration::from_millis(250),
            max: Duration::from_secs(1),
        },
        specs(),
    )
    .unwrap();
    let session =
        SessionAggregateFactory::new(&schema(), &["k"], Duration::from_millis(90), specs())
            .unwrap();
    for factory in [
        &hop as &dyn riffle_core::OperatorFactory,
        &cumulate,
        &session,
    ] {
        let batches = batches_of(&input, 37);
        let straight = results(&drive(factory, &batches, DELAY_NS, None));
        for cut in [0, 5, batches.len() / 2, batches.len() - 2] {
            let restored = results(&drive(factory, &batches, DELAY_NS, Some(cut)));
            assert_eq!(
                restored,
                straight,
                "{} restored after batch {cut}",
                factory.describe()
            );
            // A snapshot after every batch, each holding only what changed since the
            // last: restoring the chain must give the same state.
            let restored = results(&drive_checkpointed(factory, &batches, DELAY_NS, cut));
            assert_eq!(
                restored,
                straight,
                "{} restored from a chain of snapshots after batch {cut}",
                factory.describe()
            );
        }
    }
}
