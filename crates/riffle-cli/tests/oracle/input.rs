//! The generated input: two streams of JSON-lines files, `ev` and `pay`.
//!
//! ```text
//!  event time ─►  PROLOGUE_MS ──6 s──┐          BASE_MS ──10 s── ──10 s── …
//!  part-00:       prologue rows ──────┴─ 54 s ─► file 0's rows
//!  part-01:                                               file 1's rows, then late rows
//!  part-02:                                                        file 2's rows, late rows
//! ```
//!
//! Each file covers its own stretch of event time, in file-name order (as rolled logs
//! do), and rows inside a file are out of order by less than half the watermark delay.
//! The first file starts with a short prologue 60 s before the rest. Read in that order,
//! no row is ever behind a watermark, at any parallelism, after any restore.
//!
//! Except the **late rows**: every file after the first ends with a few rows back in the
//! prologue's stretch (ids above [`LATE_ID_FROM`]). They are late wherever lateness is
//! judged ([`late_by_the_rule`]), so the answer stays one deterministic answer: windows
//! and window joins drop and count them, and DuckDB's answer leaves them out there.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;
use std::path::Path;

/// Event time of the first row after the prologue (epoch milliseconds).
pub const BASE_MS: i64 = 1_700_000_000_000;
/// The watermark delay every source declares.
pub const DELAY_S: i64 = 2;
/// Event time each file covers.
pub const FILE_SPAN_MS: i64 = 10_000;
/// Event time of the prologue's first row: a minute before the rest.
pub const PROLOGUE_MS: i64 = BASE_MS - 60_000;
/// Event time the prologue covers (and its late rows: `ev`'s in its first third,
/// `pay`'s in its last).
pub const PROLOGUE_SPAN_MS: i64 = 6_000;
/// Ids of the prologue's rows start after this.
pub const PROLOGUE_ID_FROM: i64 = 500_000;
/// Ids of late rows start after this: DuckDB tells them by their id.
pub const LATE_ID_FROM: i64 = 1_000_000;
/// The widest span of event time after a row in which an operator of the grammar may
/// still take it: the longest window (10 s) or hop (8 s), the longest session gap
/// (3 s), interval bounds (1.5 s), or an outer interval join holding the watermark
/// back (retention and a compaction step, 3 s) before a window of 2 s.
pub const LONGEST_REACH_MS: i64 = 10_000;

/// Whether a row at `late_ms` is late by the rule behind the late rows: older, by more
/// than the delay, the largest disorder and the widest reach of any operator, than every
/// row outside the prologue. Every task's watermark is then past all of the row's
/// windows once every source subtask has read one row outside the prologue, or has
/// restored a watermark (the lowest of the checkpoint's subtasks) from a checkpoint
/// taken after each had — whatever the split of the input and wherever a crash landed.
///
/// A source subtask reads outside the prologue in its first batches of an attempt
/// (the prologue is at most a few splits), and a late row comes after a whole file of
/// rows, at least 40% into a run that the rate stretches over 1.5 s: a subtask would
/// have to stall for most of a run for a late row to slip through.
pub fn late_by_the_rule(late_ms: i64, jitter_ms: i64) -> bool {
    let lowest_watermark_after_prologue = BASE_MS - jitter_ms - DELAY_S * 1000;
    late_ms + LONGEST_REACH_MS < lowest_watermark_after_prologue
}

/// How much input a case has.
#[derive(Debug, Clone, Copy)]
pub struct InputShape {
    /// Files per stream.
    pub files: usize,
    /// `ev` rows per file (`pay` has a quarter as many).
    pub rows_per_file: usize,
    /// Distinct keys `k`.
    pub keys: i64,
    /// Largest disorder inside a file (< half the delay).
    pub jitter_ms: i64,
}

impl InputShape {
    pub fn random(rng: &mut StdRng) -> Self {
        Self {
            files: rng.random_range(2..=5),
            rows_per_file: rng.random_range(150..=700),
            keys: rng.random_range(3..=16),
            jitter_ms: rng.random_range(0..DELAY_S * 1000 / 2),
        }
    }
}

/// The late rows written, which riffle's windows must drop and count.
#[derive(Debug, Clone, Default)]
pub struct LateRows {
    /// `v` of each late `ev` row.
    pub ev_values: Vec<i64>,
    /// How many `pay` rows are late.
    pub pay: u64,
}

impl LateRows {
    /// Late `ev` rows whose `v` passes `keep`.
    pub fn ev_where(&self, keep: impl Fn(i64) -> bool) -> u64 {
        self.ev_values.iter().filter(|v| keep(**v)).count() as u64
    }
}

const WORDS: [&str; 6] = ["ant", "bee", "cat", "dog", "eel", "fox"];

/// One row of a stream, as a JSON line.
fn line(
    stream: &str,
    id: i64,
    ts: i64,
    rng: &mut StdRng,
    keys: i64,
    late: &mut LateRows,
) -> String {
    let k = rng.random_range(0..keys);
    if stream == "ev" {
        let v = rng.random_range(0..1000i64);
        let s = WORDS[rng.random_range(0..WORDS.len())];
        if id > LATE_ID_FROM {
            late.ev_values.push(v);
        }
        format!(r#"{{"id": {id}, "k": {k}, "v": {v}, "s": "{s}", "ts": {ts}}}"#)
    } else {
        let amount = rng.random_range(1..500i64);
        if id > LATE_ID_FROM {
            late.pay += 1;
        }
        format!(r#"{{"id": {id}, "k": {k}, "amount": {amount}, "ts": {ts}}}"#)
    }
}

/// Writes `ev/part-NN.jsonl` and `pay/part-NN.jsonl` under `dir`; returns the late rows.
pub fn write(dir: &Path, shape: InputShape, rng: &mut StdRng) -> LateRows {
    // The prologue and the late rows draw from their own generator, so the rows of the
    // files' own stretches are the ones they were before there were late rows.
    let mut odd = StdRng::seed_from_u64(rng.clone().random::<u64>() ^ 0x1a7e);
    let mut late = LateRows::default();
    for (stream, rows) in [
        ("ev", shape.rows_per_file),
        ("pay", (shape.rows_per_file / 4).max(1)),
    ] {
        let out = dir.join(stream);
        std::fs::create_dir_all(&out).unwrap();
        let mut id = 0i64;
        let mut prologue_id = PROLOGUE_ID_FROM;
        let mut late_id = LATE_ID_FROM;
        // Late `ev` and `pay` rows lie 2 s apart, further than any interval join's
        // bounds reach: no two late rows can join.
        let late_from = match stream {
            "ev" => PROLOGUE_MS,
            _ => PROLOGUE_MS + PROLOGUE_SPAN_MS * 2 / 3,
        };
        for f in 0..shape.files {
            let mut text = String::new();
            if f == 0 {
                // A few rows in every window of the prologue, for late rows to fall in.
                let n = rows / 40 + 4;
                for i in 0..n {
                    let ts = PROLOGUE_MS
                        + shape.jitter_ms
                        + i as i64 * (PROLOGUE_SPAN_MS - shape.jitter_ms) / n as i64
                        - odd.random_range(0..=shape.jitter_ms);
                    prologue_id += 1;
                    let row = line(stream, prologue_id, ts, &mut odd, shape.keys, &mut late);
                    writeln!(text, "{row}").unwrap();
                }
            }
            let start = BASE_MS + f as i64 * FILE_SPAN_MS;
            for i in 0..rows {
                // Evenly spread over the file's stretch, then pulled back by the jitter.
                let even = start
                    + shape.jitter_ms
                    + i as i64 * (FILE_SPAN_MS - shape.jitter_ms) / rows as i64;
                let ts = even - rng.random_range(0..=shape.jitter_ms);
                id += 1;
                let row = line(stream, id, ts, rng, shape.keys, &mut late);
                writeln!(text, "{row}").unwrap();
            }
            if f > 0 {
                // Read only after the rest of the file, so never before every source
                // subtask is past the prologue.
                for _ in 0..odd.random_range(1..=rows / 100 + 2) {
                    let ts = late_from + odd.random_range(0..PROLOGUE_SPAN_MS / 3);
                    assert!(late_by_the_rule(ts, shape.jitter_ms));
                    late_id += 1;
                    let row = line(stream, late_id, ts, &mut odd, shape.keys, &mut late);
                    writeln!(text, "{row}").unwrap();
                }
            }
            std::fs::write(out.join(format!("part-{f:02}.jsonl")), text).unwrap();
        }
    }
    late
}
