//! A direct driver for operators (no runtime): batches in, watermarks after each batch,
//! optional snapshot/restore at a chosen batch, outputs collected.

#![allow(dead_code)]

use riffle_core::arrow::array::{
    ArrayRef, Float64Array, Int64Array, StringArray, TimestampNanosecondArray,
};
use riffle_core::arrow::datatypes::{DataType, Field};
use riffle_core::{Epoch, OperatorContext, OperatorFactory, RecordBatch, StreamSchema};
use std::sync::Arc;

/// A tiny deterministic generator (SplitMix64), so failures replay from the seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One input row: key, optional value, label, event time (ns).
#[derive(Debug, Clone)]
pub struct Row {
    pub k: i64,
    pub v: Option<i64>,
    pub s: String,
    pub ts: i64,
}

pub fn schema() -> StreamSchema {
    StreamSchema::with_timestamp(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("v", DataType::Int64, true),
        Field::new("s", DataType::Utf8, false),
    ])
}

/// `n` rows with keys in `0..keys`, event time advancing 10 ms a row with up to
/// `disorder_ms` of jitter, values sometimes null.
pub fn rows(seed: u64, n: usize, keys: u64, disorder_ms: u64) -> Vec<Row> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|i| {
            let jitter = if disorder_ms > 0 {
                rng.below(disorder_ms) as i64
            } else {
                0
            };
            let ts = (i as i64 * 10 - jitter).max(0) * 1_000_000;
            let v = if rng.below(10) == 0 {
                None
            } else {
                Some(rng.below(1000) as i64 - 300)
            };
            Row {
                k: rng.below(keys) as i64,
                v,
                s: format!("s{}", rng.below(5)),
                ts,
            }
        })
        .collect()
}

pub fn to_batch(schema: &StreamSchema, rows: &[Row]) -> RecordBatch {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(
            rows.iter().map(|r| r.k).collect::<Vec<_>>(),
        )),
        Arc::new(Int64Array::from(
            rows.iter().map(|r| r.v).collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            rows.iter().map(|r| r.s.clone()).collect::<Vec<_>>(),
        )),
        Arc::new(
            TimestampNanosecondArray::from(rows.iter().map(|r| r.ts).collect::<Vec<_>>())
                .with_timezone("UTC"),
        ),
    ];
    RecordBatch::try_new(schema.schema.clone(), columns).unwrap()
}

/// Feeds `(input, batch)` pairs, advancing the watermark to `max_ts - delay` after
/// each; with `restore_at = Some(i)`, snapshots after batch `i`, builds a fresh
/// operator from the snapshot and continues with it.
pub fn drive(
    factory: &dyn OperatorFactory,
    inputs: &[(usize, RecordBatch)],
    delay_ns: i64,
    restore_at: Option<usize>,
) -> Vec<RecordBatch> {
    drive_with(factory, inputs, delay_ns, restore_at, false)
}

/// Like [`drive`], but snapshots after every input (as checkpoints do, each one
/// incremental on the last) and restores from the newest snapshot at `restore_at`.
pub fn drive_checkpointed(
    factory: &dyn OperatorFactory,
    inputs: &[(usize, RecordBatch)],
    delay_ns: i64,
    restore_at: usize,
) -> Vec<RecordBatch> {
    drive_with(factory, inputs, delay_ns, Some(restore_at), true)
}

fn drive_with(
    factory: &dyn OperatorFactory,
    inputs: &[(usize, RecordBatch)],
    delay_ns: i64,
    restore_at: Option<usize>,
    snapshot_every_input: bool,
) -> Vec<RecordBatch> {
    let ctx = OperatorContext::detached("op", 0, 1);
    let mut op = factory.create(&ctx).unwrap();
    let mut out = Vec::new();
    let mut max_ts = i64::MIN;
    let mut watermark = i64::MIN;
    for (i, (input, batch)) in inputs.iter().enumerate() {
        let ts_index = batch.schema().index_of("_timestamp").unwrap();
        let ts = batch
            .column(ts_index)
            .as_any()
            .downcast_ref::<TimestampNanosecondArray>()
            .unwrap();
        if let Some(m) = ts.values().iter().max() {
            max_ts = max_ts.max(*m);
        }
        op.on_batch(*input, batch.clone(), &mut out).unwrap();
        let w = max_ts.saturating_sub(delay_ns);
        if w > watermark {
            watermark = w;
            op.on_watermark(w, &mut out).unwrap();
        }
        if snapshot_every_input && restore_at != Some(i) {
            op.snapshot(Epoch(i as u64 + 1)).unwrap();
        }
        if restore_at == Some(i) {
            let state = op.snapshot(Epoch(i as u64 + 1)).unwrap();
            op = factory.create(&ctx).unwrap();
            op.restore(state).unwrap();
            // The runtime re-delivers the watermark a restored operator resumes from.
            op.on_watermark(watermark, &mut out).unwrap();
        }
    }
    op.on_watermark(i64::MAX, &mut out).unwrap();
    op.on_end(&mut out).unwrap();
    out
}

/// Output rows as strings (one per row, columns joined), sorted.
pub fn lines(batches: &[RecordBatch]) -> Vec<String> {
    let mut out = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            let cells: Vec<String> = b
                .columns()
                .iter()
                .map(|c| riffle_core::arrow::util::display::array_value_to_string(c, r).unwrap())
                .collect();
            out.push(cells.join("|"));
        }
    }
    out.sort();
    out
}

pub fn f64s(v: Vec<Option<f64>>) -> Float64Array {
    Float64Array::from(v)
}
