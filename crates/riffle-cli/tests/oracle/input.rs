//! The generated input: two streams of JSON-lines files, `ev` and `pay`.
//!
//! Each file covers its own stretch of event time, in file-name order (as rolled logs
//! do), and rows inside a file are out of order by less than half the watermark delay.
//! So no row is ever behind a watermark, at any parallelism, after any restore: every
//! window, session and join holds all its rows, and the result is one deterministic
//! answer that a batch engine computes from the same files.

use rand::rngs::StdRng;
use rand::Rng;
use std::fmt::Write as _;
use std::path::Path;

/// Event time of the first row (epoch milliseconds).
pub const BASE_MS: i64 = 1_700_000_000_000;
/// The watermark delay every source declares.
pub const DELAY_S: i64 = 2;
/// Event time each file covers.
pub const FILE_SPAN_MS: i64 = 10_000;

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

const WORDS: [&str; 6] = ["ant", "bee", "cat", "dog", "eel", "fox"];

/// Writes `ev/part-NN.jsonl` and `pay/part-NN.jsonl` under `dir`.
pub fn write(dir: &Path, shape: InputShape, rng: &mut StdRng) {
    for (stream, rows) in [
        ("ev", shape.rows_per_file),
        ("pay", (shape.rows_per_file / 4).max(1)),
    ] {
        let out = dir.join(stream);
        std::fs::create_dir_all(&out).unwrap();
        let mut id = 0i64;
        for f in 0..shape.files {
            let start = BASE_MS + f as i64 * FILE_SPAN_MS;
            let mut text = String::new();
            for i in 0..rows {
                // Evenly spread over the file's stretch, then pulled back by the jitter.
                let even = start
                    + shape.jitter_ms
                    + i as i64 * (FILE_SPAN_MS - shape.jitter_ms) / rows as i64;
                let ts = even - rng.random_range(0..=shape.jitter_ms);
                let k = rng.random_range(0..shape.keys);
                id += 1;
                if stream == "ev" {
                    let v = rng.random_range(0..1000i64);
                    let s = WORDS[rng.random_range(0..WORDS.len())];
                    writeln!(
                        text,
                        r#"{{"id": {id}, "k": {k}, "v": {v}, "s": "{s}", "ts": {ts}}}"#
                    )
                    .unwrap();
                } else {
                    let amount = rng.random_range(1..500i64);
                    writeln!(
                        text,
                        r#"{{"id": {id}, "k": {k}, "amount": {amount}, "ts": {ts}}}"#
                    )
                    .unwrap();
                }
            }
            std::fs::write(out.join(format!("part-{f:02}.jsonl")), text).unwrap();
        }
    }
}
