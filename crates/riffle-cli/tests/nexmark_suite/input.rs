//! The suite's input: Nexmark-shaped `person`, `auction` and `bid` rows as JSON-lines
//! files with Flink's column names, drawn from a fixed seed.
//!
//! Each file covers its own 10 s of event time, in file-name order, and rows inside a
//! file are out of order by less than the 4 s watermark delay, so no row is ever late:
//! every window, session and join holds all its rows at any parallelism, and the
//! answer is the one a batch engine computes from the same files. The hour crosses
//! midnight, so per-day groups (q15–q17) see two days.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;
use std::path::Path;

/// Event time of the first row: 2023-11-14 23:59:30 UTC, in epoch milliseconds.
pub const BASE_MS: i64 = 1_700_006_370_000;
/// Event time each file covers.
const FILE_SPAN_MS: i64 = 10_000;
/// Largest disorder inside a file (well under the 4 s delay).
const JITTER_MS: i64 = 1_500;
const FILES: i64 = 6;
const PERSONS_PER_FILE: i64 = 8;
const AUCTIONS_PER_FILE: i64 = 30;
const BIDS_PER_FILE: i64 = 250;

const STATES: [&str; 6] = ["OR", "ID", "CA", "WA", "AZ", "NY"];
const CITIES: [&str; 4] = ["Portland", "Boise", "Kent", "Phoenix"];
const CHANNELS: [&str; 6] = ["Apple", "Google", "Facebook", "Baidu", "shop", "partner"];
const WORDS: [&str; 6] = ["cat", "dog", "pace", "accent", "oak", "cocoa"];

/// An id of auction number `n`: every third one is a multiple of 123 (q2's filter).
fn auction_id(n: i64) -> i64 {
    984 + 41 * n
}

/// Writes `person/`, `auction/`, `bid/` and `tick/` under `dir`.
pub fn write(dir: &Path) {
    write_side_input(dir);
    write_ticks(dir);
    let mut rng = StdRng::seed_from_u64(0x5eed_ce11);
    let mut text = [String::new(), String::new(), String::new()];
    let mut persons = 0i64;
    let mut auctions: Vec<(i64, i64, i64)> = Vec::new(); // (id, dateTime, expires)
    for f in 0..FILES {
        let start = BASE_MS + f * FILE_SPAN_MS;
        for t in &mut text {
            t.clear();
        }
        let at = |i: i64, n: i64, rng: &mut StdRng| {
            start + JITTER_MS + i * (FILE_SPAN_MS - JITTER_MS) / n - rng.random_range(0..=JITTER_MS)
        };
        for i in 0..PERSONS_PER_FILE {
            let id = 1000 + persons;
            persons += 1;
            let ts = at(i, PERSONS_PER_FILE, &mut rng);
            writeln!(
                text[0],
                r#"{{"id": {id}, "name": "person {id}", "emailAddress": "p{id}@example.com", "creditCard": "4000 {id}", "city": "{}", "state": "{}", "dateTime": {ts}, "extra": "{}"}}"#,
                CITIES[rng.random_range(0..CITIES.len())],
                STATES[rng.random_range(0..STATES.len())],
                WORDS[rng.random_range(0..WORDS.len())],
            )
            .unwrap();
        }
        for i in 0..AUCTIONS_PER_FILE {
            let id = auction_id(auctions.len() as i64);
            let ts = at(i, AUCTIONS_PER_FILE, &mut rng);
            let expires = ts + rng.random_range(2_000..15_000);
            auctions.push((id, ts, expires));
            writeln!(
                text[1],
                r#"{{"id": {id}, "itemName": "item {id}", "description": "about {id}", "initialBid": {}, "reserve": {}, "dateTime": {ts}, "expires": {expires}, "seller": {}, "category": {}, "extra": "{}"}}"#,
                rng.random_range(100..10_000),
                rng.random_range(10_000..100_000),
                1000 + rng.random_range(0..persons),
                rng.random_range(10..15),
                WORDS[rng.random_range(0..WORDS.len())],
            )
            .unwrap();
        }
        // Bidder 999's bids are exactly 10 s apart in files 0 and 1 (one session of
        // q11's 10 s gap, as in Flink) and 10.001 s apart in files 4 and 5 (two). Each
        // goes where its time falls among the file's bids, so it is no later than the
        // file's disorder (a per-row OVER window would drop it otherwise).
        let mut touching = match f {
            0 | 1 => Some(start + 5_000),
            4 => Some(start),
            5 => Some(start + 1),
            _ => None,
        }
        .map(|ts| {
            (
                ts,
                format!(
                    "{{\"auction\": {}, \"bidder\": 999, \"price\": {}, \"channel\": \"Google\", \"url\": \"https://www.nexmark.com/a/b/c\", \"dateTime\": {ts}, \"extra\": \"\"}}\n",
                    auctions[auctions.len() - 1].0,
                    777_000 + f,
                ),
            )
        });
        for i in 0..BIDS_PER_FILE {
            // Bid i's time is at most its nominal time, and at most JITTER_MS before it.
            let nominal = start + JITTER_MS + i * (FILE_SPAN_MS - JITTER_MS) / BIDS_PER_FILE;
            if touching.as_ref().is_some_and(|(ts, _)| nominal >= *ts) {
                if let Some((_, line)) = touching.take() {
                    text[2].push_str(&line);
                }
            }
            let ts = at(i, BIDS_PER_FILE, &mut rng);
            // Mostly recent auctions (some bids land after the auction expired).
            let recent = auctions.len().saturating_sub(40);
            let auction = auctions[rng.random_range(recent..auctions.len())].0;
            // Bidders come and go in groups, so sessions (q11) start and end.
            let bidder = 1000 + (f % 3) + 3 * rng.random_range(0..(persons / 3).max(1));
            let price = match rng.random_range(0..10) {
                0..=6 => rng.random_range(100..10_000),
                7 | 8 => rng.random_range(10_000..1_000_000),
                _ => rng.random_range(1_000_000..60_000_000),
            };
            // No two bids of an auction share a price, so every Top-N (q9, q19) has one
            // answer whatever order tied rows would arrive in.
            let price = price / 1000 * 1000 + (f * BIDS_PER_FILE + i) % 1000;
            let channel = CHANNELS[rng.random_range(0..CHANNELS.len())];
            let (a, b) = (
                WORDS[rng.random_range(0..WORDS.len())],
                WORDS[rng.random_range(0..WORDS.len())],
            );
            let url = match rng.random_range(0..4) {
                0 => format!(
                    "https://www.nexmark.com/{a}/{b}/item.htm?query=1&channel_id={}",
                    rng.random_range(0..50)
                ),
                1 => format!("channel_id={}&query=2", rng.random_range(0..50)),
                2 => format!("https://www.nexmark.com/{a}"),
                _ => format!("https://www.nexmark.com/{a}/{b}/item.htm?query=1"),
            };
            writeln!(
                text[2],
                r#"{{"auction": {auction}, "bidder": {bidder}, "price": {price}, "channel": "{channel}", "url": "{url}", "dateTime": {ts}, "extra": "{}"}}"#,
                WORDS[rng.random_range(0..WORDS.len())],
            )
            .unwrap();
        }
        if let Some((_, line)) = touching.take() {
            text[2].push_str(&line);
        }
        for (table, t) in ["person", "auction", "bid"].iter().zip(&text) {
            let out = dir.join(table);
            std::fs::create_dir_all(&out).unwrap();
            std::fs::write(out.join(format!("part-{f:02}.jsonl")), t).unwrap();
        }
    }
}

/// `tick/`: `(id, v, dateTime)` rows made for queries that meet a window's extreme by
/// time (`more/*_rows_by_time.sql`). Values come from a small range, so many rows tie
/// at a window's maximum and minimum, and every 2 s boundary holds a row at 0 and one
/// at 19 exactly: each meets the window it ends and, often, the one it starts. A few
/// values are NULL. Files cover 10 s each, with less disorder than the watermark delay.
fn write_ticks(dir: &Path) {
    let mut rng = StdRng::seed_from_u64(0x71c4);
    let out = dir.join("tick");
    std::fs::create_dir_all(&out).unwrap();
    let mut id = 0;
    for f in 0..FILES {
        let start = BASE_MS + f * FILE_SPAN_MS;
        let mut text = String::new();
        let mut row = |ts: i64, v: Option<i64>, text: &mut String| {
            id += 1;
            let v = v.map_or("null".to_string(), |v| v.to_string());
            writeln!(text, r#"{{"id": {id}, "v": {v}, "dateTime": {ts}}}"#).unwrap();
        };
        // Each boundary goes where its time falls among the nominal times.
        let mut boundaries = (start..start + FILE_SPAN_MS).step_by(2_000).peekable();
        for i in 0..60 {
            let nominal = start + JITTER_MS + i * (FILE_SPAN_MS - JITTER_MS) / 60;
            while let Some(b) = boundaries.next_if(|&b| b <= nominal) {
                row(b, Some(0), &mut text);
                row(b, Some(19), &mut text);
            }
            let ts = nominal - rng.random_range(0..=JITTER_MS);
            let v = (rng.random_range(0..30) != 0).then(|| rng.random_range(0..20));
            row(ts, v, &mut text);
        }
        for b in boundaries {
            row(b, Some(0), &mut text);
            row(b, Some(19), &mut text);
        }
        std::fs::write(out.join(format!("part-{f:02}.jsonl")), text).unwrap();
    }
}

/// The rows of q13's `side_input` (`key`, `value`): keys 0 to 9999 but those that are
/// 3 modulo 7 (bids of those auctions find no row), and two rows for multiples of 500.
fn side_input_rows() -> Vec<(i64, String)> {
    let mut rows = Vec::new();
    for key in 0..10_000i64 {
        if key % 7 == 3 {
            continue;
        }
        rows.push((key, format!("side {key}")));
        if key % 500 == 0 {
            rows.push((key, format!("more {key}")));
        }
    }
    rows
}

/// `side_input/side_input.csv`, with a header.
fn write_side_input(dir: &Path) {
    let mut csv = String::from("key,value\n");
    for (key, value) in side_input_rows() {
        writeln!(csv, "{key},{value}").unwrap();
    }
    let out = dir.join("side_input");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("side_input.csv"), csv).unwrap();
}

/// The options that replace q13's `side_input` table's: the CSV file [`write`] made.
pub fn side_input_files(dir: &Path) -> String {
    format!(
        "'connector' = 'filesystem', 'path' = '{}', 'format' = 'csv'",
        dir.join("side_input").display()
    )
}

/// The source DDL that replaces the suite's `datagen` table and its views: the same
/// tables and column names, read from the files [`write`] made; with `rate`, each
/// table reads at most that many rows per second (so a run spans many checkpoints).
pub fn source_ddl(dir: &Path, rate: Option<u64>) -> String {
    let throttle = rate
        .map(|r| format!(", 'scan.max-records-per-second' = '{r}'"))
        .unwrap_or_default();
    let table = |name: &str, columns: &str| {
        format!(
            "CREATE TABLE {name} (\n  {columns},\n  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND\n) WITH ('connector' = 'filesystem', 'path' = '{}', 'format' = 'json'{throttle});\n",
            dir.join(name).display()
        )
    };
    [
        table("person", "id BIGINT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR, city VARCHAR, state VARCHAR, `dateTime` TIMESTAMP(3), extra VARCHAR"),
        table("auction", "id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT, `dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra VARCHAR"),
        table("bid", "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, `dateTime` TIMESTAMP(3), extra VARCHAR"),
        table("tick", "id BIGINT, v BIGINT, `dateTime` TIMESTAMP(3)"),
    ]
    .concat()
}
