//! Named behaviours of the by-time stages.

use super::*;
use riffle_core::arrow::array::{AsArray, Int64Array};
use riffle_core::arrow::datatypes::{DataType, Int64Type, TimestampNanosecondType};
use riffle_core::{RecordBatch, TIMESTAMP_FIELD};

const MS: i64 = 1_000_000;

fn schema() -> StreamSchema {
    StreamSchema::with_timestamp(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("price", DataType::Int64, true),
    ])
}

/// Rows `(id, price, time in ms)`.
fn batch(rows: &[(i64, Option<i64>, i64)]) -> RecordBatch {
    let s = schema();
    let mut columns: Vec<riffle_core::arrow::array::ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.1))),
    ];
    let ts = crate::window::timestamp_array(rows.iter().map(|r| r.2 * MS).collect());
    columns.insert(s.timestamp_index, ts);
    RecordBatch::try_new(s.schema.clone(), columns).unwrap()
}

fn stage(global: bool, end_inclusive: bool) -> Box<dyn Operator> {
    WindowMaxRowsFactory::new(&schema(), "price", Duration::from_millis(10), global)
        .unwrap()
        .by_time(end_inclusive, ["window_start", "window_end", "max_price"])
        .unwrap()
        .create(&OperatorContext::detached("max_rows", 0, 1))
        .unwrap()
}

/// `(id, window start in ms)` of each output row, sorted.
fn matches(out: &[RecordBatch]) -> Vec<(i64, i64)> {
    let mut got = Vec::new();
    for b in out {
        let ids = b.column_by_name("id").unwrap().as_primitive::<Int64Type>();
        let starts = b
            .column_by_name("window_start")
            .unwrap()
            .as_primitive::<TimestampNanosecondType>();
        let prices = b
            .column_by_name("price")
            .unwrap()
            .as_primitive::<Int64Type>();
        let maxima = b
            .column_by_name("max_price")
            .unwrap()
            .as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            assert_eq!(prices.value(i), maxima.value(i));
            got.push((ids.value(i), starts.value(i) / MS));
        }
    }
    got.sort_unstable();
    got
}

/// Feeds `steps` (a batch, or a watermark in ms) through a local stage and a global one.
fn run(end_inclusive: bool, steps: &[Result<RecordBatch, i64>]) -> Vec<(i64, i64)> {
    let (mut local, mut global) = (stage(false, end_inclusive), stage(true, end_inclusive));
    let mut out = Vec::new();
    for step in steps {
        let mut between = Vec::new();
        match step {
            Ok(b) => local.on_batch(0, b.clone(), &mut between).unwrap(),
            Err(wm) => local.on_watermark(wm * MS, &mut between).unwrap(),
        }
        for b in between {
            global.on_batch(0, b, &mut out).unwrap();
        }
        if let Err(wm) = step {
            global.on_watermark(wm * MS, &mut out).unwrap();
        }
    }
    matches(&out)
}

#[test]
fn a_row_exactly_at_a_windows_end_meets_that_window_and_its_own() {
    // Windows [0, 10) and [10, 20): row 3 at 10 ms holds the first window's maximum and
    // its own window's; BETWEEN start AND end takes it for both.
    let rows = batch(&[
        (1, Some(5), 0),
        (2, Some(7), 5),
        (3, Some(7), 10),
        (4, Some(2), 12),
        (5, None, 9),
    ]);
    let steps = [Ok(rows), Err(100)];
    assert_eq!(run(true, &steps), vec![(2, 0), (3, 0), (3, 10)]);
    assert_eq!(run(false, &steps), vec![(2, 0), (3, 10)]);
}

#[test]
fn a_row_at_a_windows_end_arriving_after_it_closed_still_meets_it() {
    let steps = [
        Ok(batch(&[(1, Some(7), 3), (2, Some(4), 8)])),
        Err(9),
        Ok(batch(&[(3, Some(7), 10), (4, Some(9), 10)])),
        Err(100),
    ];
    assert_eq!(run(true, &steps), vec![(1, 0), (3, 0), (4, 10)]);
}

#[test]
fn a_late_row_meets_its_closed_windows_maximum_without_changing_it() {
    let steps = [
        Ok(batch(&[(1, Some(7), 3), (2, Some(4), 8)])),
        Err(15),
        // Behind the watermark: 7 meets the maximum, 9 would have raised it but comes
        // too late, as for the window aggregate the plan replaces.
        Ok(batch(&[(3, Some(7), 1), (4, Some(9), 2), (5, Some(3), 12)])),
        Err(100),
    ];
    assert_eq!(run(true, &steps), vec![(1, 0), (3, 0), (5, 10)]);
}

#[test]
fn ties_at_the_maximum_all_match_and_a_higher_value_replaces_them() {
    let steps = [
        Ok(batch(&[(1, Some(7), 1), (2, Some(7), 2)])),
        Ok(batch(&[(3, Some(7), 3)])),
        Err(5),
        Ok(batch(&[(4, Some(8), 6), (5, Some(8), 7)])),
        Err(100),
    ];
    assert_eq!(run(true, &steps), vec![(4, 0), (5, 0)]);
}

#[test]
fn min_matches_the_lowest_value() {
    let mut local = WindowMaxRowsFactory::new(&schema(), "price", Duration::from_millis(10), true)
        .unwrap()
        .extreme(Extreme::Min)
        .by_time(true, ["window_start", "window_end", "max_price"])
        .unwrap()
        .create(&OperatorContext::detached("min_rows", 0, 1))
        .unwrap();
    let mut out = Vec::new();
    let rows = batch(&[(1, Some(5), 0), (2, Some(-3), 5), (3, Some(-3), 10)]);
    local.on_batch(0, rows, &mut out).unwrap();
    local.on_watermark(100 * MS, &mut out).unwrap();
    assert_eq!(matches(&out), vec![(2, 0), (3, 0), (3, 10)]);
}

#[test]
fn the_global_stage_appends_the_window_and_its_extreme() {
    let f = WindowMaxRowsFactory::new(&schema(), "price", Duration::from_millis(10), true)
        .unwrap()
        .by_time(true, ["ws", "we", "m"])
        .unwrap();
    let names: Vec<&str> = f
        .output_schema()
        .schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(names[names.len() - 3..], ["ws", "we", "m"]);
    assert!(names.contains(&TIMESTAMP_FIELD));
    let clash = WindowMaxRowsFactory::new(&schema(), "price", Duration::from_millis(10), true)
        .unwrap()
        .by_time(true, ["ws", "id", "m"]);
    assert!(clash.is_err());
}

fn by_window(global: bool) -> Box<dyn Operator> {
    WindowMaxRowsFactory::new(&schema(), "price", Duration::from_millis(10), global)
        .unwrap()
        .create(&OperatorContext::detached("max_rows", 0, 1))
        .unwrap()
}

fn ids(out: &[RecordBatch]) -> Vec<i64> {
    let mut ids: Vec<i64> = out
        .iter()
        .flat_map(|b| {
            b.column_by_name("id")
                .unwrap()
                .as_primitive::<Int64Type>()
                .values()
                .to_vec()
        })
        .collect();
    ids.sort_unstable();
    ids
}

#[test]
fn local_states_merged_at_a_lower_parallelism_keep_the_largest_maximum() {
    let (mut a, mut b) = (by_window(false), by_window(false));
    let mut out = Vec::new();
    a.on_batch(0, batch(&[(1, Some(100), 1)]), &mut out)
        .unwrap();
    b.on_batch(0, batch(&[(2, Some(200), 2)]), &mut out)
        .unwrap();
    let epoch = riffle_core::Epoch(1);
    let (a, b) = (a.snapshot(epoch).unwrap(), b.snapshot(epoch).unwrap());
    // The larger one first: a restore that took the last row's value as the maximum
    // would then drop row 2 for row 3.
    let mut merged = by_window(false);
    let batches = b.batches.into_iter().chain(a.batches).collect();
    merged
        .restore(riffle_core::OperatorState::of(batches))
        .unwrap();
    merged
        .on_batch(0, batch(&[(3, Some(150), 3)]), &mut out)
        .unwrap();
    merged.on_watermark(100 * MS, &mut out).unwrap();
    assert_eq!(ids(&out), vec![2]);
}

#[test]
fn a_local_stage_sends_what_it_holds_when_its_source_goes_idle() {
    for mut local in [by_window(false), stage(false, true)] {
        let mut out = Vec::new();
        local
            .on_batch(0, batch(&[(1, Some(7), 1), (2, Some(3), 2)]), &mut out)
            .unwrap();
        assert!(out.is_empty());
        local.on_idle(&mut out).unwrap();
        assert_eq!(ids(&out), vec![1]);
        // Afterwards a row that may still be the maximum goes at once, once.
        out.clear();
        local
            .on_batch(
                0,
                batch(&[(3, Some(7), 3), (4, Some(9), 4), (5, Some(2), 5)]),
                &mut out,
            )
            .unwrap();
        local.on_watermark(100 * MS, &mut out).unwrap();
        assert_eq!(ids(&out), vec![3, 4]);
    }
    // The global stage fires only when its windows close.
    let mut global = by_window(true);
    let mut out = Vec::new();
    global
        .on_batch(0, batch(&[(1, Some(7), 1)]), &mut out)
        .unwrap();
    global.on_idle(&mut out).unwrap();
    assert!(out.is_empty());
}

#[test]
fn closed_windows_extremes_are_handed_out_as_the_same_batches_until_the_chain_is_long() {
    let mut global = stage(true, true);
    let mut out = Vec::new();
    let closed_batches = |g: &mut Box<dyn Operator>| -> Vec<RecordBatch> {
        g.snapshot(riffle_core::Epoch(1))
            .unwrap()
            .batches
            .into_iter()
            .filter(|b| b.column_by_name("extreme").is_some())
            .collect()
    };
    global
        .on_batch(0, batch(&[(1, Some(7), 1)]), &mut out)
        .unwrap();
    global.on_watermark(15 * MS, &mut out).unwrap();
    let first = closed_batches(&mut global);
    assert_eq!(first.len(), 1);
    // Nothing closed since: the same arrays, so a checkpoint reuses their file.
    let again = closed_batches(&mut global);
    assert!(Arc::ptr_eq(first[0].column(2), again[0].column(2)));
    // Each window closed adds a batch, until the chain is rewritten as one.
    for w in 1..=40 {
        global
            .on_batch(0, batch(&[(w + 1, Some(w), w * 10 + 1)]), &mut out)
            .unwrap();
        global.on_watermark((w * 10 + 15) * MS, &mut out).unwrap();
        let chain = closed_batches(&mut global);
        assert!(chain.len() <= 32, "{}", chain.len());
        let rows: usize = chain.iter().map(RecordBatch::num_rows).sum();
        assert_eq!(rows, w as usize + 1);
    }
    // A restore finds every closed window's maximum: a late row meets it.
    let state = global.snapshot(riffle_core::Epoch(2)).unwrap();
    let mut restored = stage(true, true);
    restored.restore(state).unwrap();
    restored.on_watermark(1000 * MS, &mut out).unwrap();
    let mut late = Vec::new();
    restored
        .on_batch(0, batch(&[(99, Some(20), 205)]), &mut late)
        .unwrap();
    assert_eq!(matches(&late), vec![(99, 200)]);
}
