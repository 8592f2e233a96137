//! Every Nexmark query against a deliberately simple reference (plain Rust over the same
//! generated events), at parallelism 1 and 2. Outputs are compared as sorted multisets.

use crate::common;

use common::{config, events, f, rows, run, MS, V};
use riffle_bench::queries::{Query, Q11_GAP, Q5_SLIDE, Q5_WINDOW, TUMBLE_10S};
use riffle_connectors::nexmark::{Auction, Bid, Event, Person};
use std::collections::{BTreeMap, HashMap};

const EVENTS: u64 = 120_000;

fn bids(ev: &[Event]) -> Vec<&Bid> {
    ev.iter()
        .filter_map(|e| if let Event::Bid(b) = e { Some(b) } else { None })
        .collect()
}
fn auctions(ev: &[Event]) -> Vec<&Auction> {
    ev.iter()
        .filter_map(|e| {
            if let Event::Auction(a) = e {
                Some(a)
            } else {
                None
            }
        })
        .collect()
}
fn people(ev: &[Event]) -> Vec<&Person> {
    ev.iter()
        .filter_map(|e| {
            if let Event::Person(p) = e {
                Some(p)
            } else {
                None
            }
        })
        .collect()
}
fn nanos(d: std::time::Duration) -> i64 {
    d.as_nanos() as i64
}
fn floor_to(t: i64, size: i64) -> i64 {
    t - t.rem_euclid(size)
}

fn check(query: Query, columns: &[&str], reference: Vec<Vec<V>>) {
    let mut reference = reference;
    reference.sort();
    assert!(
        !reference.is_empty(),
        "{query}: the reference produced no rows; the test would prove nothing"
    );
    for p in [1, 2] {
        let (batches, summary) = run(query, config(EVENTS), p);
        let got = rows(&batches, columns);
        assert_eq!(
            summary.late_rows_dropped(),
            0,
            "{query} p{p}: in-order input must have no late rows"
        );
        assert_eq!(got.len(), reference.len(), "{query} p{p}: row count");
        assert_eq!(
            got, reference,
            "{query} p{p}: rows differ from the reference"
        );
    }
}

#[test]
fn q0_passes_bids_through() {
    let ev = events(&config(EVENTS));
    let reference = bids(&ev)
        .iter()
        .map(|b| {
            vec![
                V::I(b.auction),
                V::I(b.bidder),
                V::I(b.price),
                V::I(b.date_time_ms),
                V::S(b.extra.clone()),
            ]
        })
        .collect();
    check(
        Query::Q0,
        &["auction", "bidder", "price", "date_time", "extra"],
        reference,
    );
}

#[test]
fn q1_converts_prices() {
    let ev = events(&config(EVENTS));
    let reference = bids(&ev)
        .iter()
        .map(|b| {
            vec![
                V::I(b.auction),
                V::I(b.bidder),
                // Exact, as DECIMAL: 0.908 × price with three decimals.
                {
                    let milli = i128::from(b.price) * 908;
                    V::S(format!("{}.{:03}", milli / 1000, milli % 1000))
                },
                V::I(b.date_time_ms),
            ]
        })
        .collect();
    check(
        Query::Q1,
        &["auction", "bidder", "price", "date_time"],
        reference,
    );
}

#[test]
fn q2_selects_auctions() {
    let ev = events(&config(EVENTS));
    let reference = bids(&ev)
        .iter()
        .filter(|b| b.auction % 123 == 0)
        .map(|b| vec![V::I(b.auction), V::I(b.price)])
        .collect();
    check(Query::Q2, &["auction", "price"], reference);
}

#[test]
fn q3_joins_local_sellers_with_their_auctions() {
    let ev = events(&config(EVENTS));
    let mut reference = Vec::new();
    for p in people(&ev)
        .iter()
        .filter(|p| ["OR", "ID", "CA"].contains(&p.state.as_str()))
    {
        for a in auctions(&ev)
            .iter()
            .filter(|a| a.category == 10 && a.seller == p.id)
        {
            reference.push(vec![
                V::S(p.name.clone()),
                V::S(p.city.clone()),
                V::S(p.state.clone()),
                V::I(a.id),
            ]);
        }
    }
    check(Query::Q3, &["name", "city", "state", "id"], reference);
}

#[test]
fn q4_averages_closing_prices_per_category() {
    let ev = events(&config(EVENTS));
    let all_bids = bids(&ev);
    let mut by_category: BTreeMap<i64, (f64, i64)> = BTreeMap::new();
    for a in auctions(&ev) {
        let best = all_bids
            .iter()
            .filter(|b| {
                b.auction == a.id
                    && b.date_time_ms >= a.date_time_ms
                    && b.date_time_ms <= a.expires_ms
            })
            .map(|b| b.price)
            .max();
        if let Some(best) = best {
            let e = by_category.entry(a.category).or_default();
            e.0 += best as f64;
            e.1 += 1;
        }
    }
    let reference: Vec<Vec<V>> = by_category
        .iter()
        .map(|(c, (sum, n))| vec![V::I(*c), f(sum / *n as f64)])
        .collect();
    assert!(!reference.is_empty());
    for p in [1, 2] {
        let (batches, _) = run(Query::Q4, config(EVENTS), p);
        // An updating result: the last row per category is its current value.
        let mut latest: BTreeMap<i64, V> = BTreeMap::new();
        for b in &batches {
            let cats = b.column_by_name("category").unwrap();
            let avg = b.column_by_name("avg_final").unwrap();
            use riffle_core::arrow::array::AsArray;
            use riffle_core::arrow::datatypes::{Float64Type, Int64Type};
            for r in 0..b.num_rows() {
                latest.insert(
                    cats.as_primitive::<Int64Type>().value(r),
                    f(avg.as_primitive::<Float64Type>().value(r)),
                );
            }
        }
        let got: Vec<Vec<V>> = latest.into_iter().map(|(c, v)| vec![V::I(c), v]).collect();
        assert_eq!(got, reference, "q4 p{p}");
    }
}

#[test]
fn q5_finds_hot_auctions_per_hop_window() {
    let ev = events(&config(EVENTS));
    let (size, slide) = (nanos(Q5_WINDOW), nanos(Q5_SLIDE));
    let mut counts: BTreeMap<i64, HashMap<i64, i64>> = BTreeMap::new();
    for b in bids(&ev) {
        let t = b.date_time_ms * MS;
        let newest = floor_to(t, slide);
        for j in 0..size / slide {
            *counts
                .entry(newest - j * slide)
                .or_default()
                .entry(b.auction)
                .or_default() += 1;
        }
    }
    let mut reference = Vec::new();
    for (start, per_auction) in counts {
        let max = per_auction.values().copied().max().unwrap_or(0);
        for (auction, n) in per_auction.into_iter().filter(|(_, n)| *n == max) {
            reference.push(vec![V::I(auction), V::I(start), V::I(n)]);
        }
    }
    check(Query::Q5, &["auction", "window_start", "num"], reference);
}

#[test]
fn q7_finds_highest_bids_per_window() {
    let ev = events(&config(EVENTS));
    let size = nanos(TUMBLE_10S);
    let mut max: BTreeMap<i64, i64> = BTreeMap::new();
    for b in bids(&ev) {
        let w = floor_to(b.date_time_ms * MS, size);
        let m = max.entry(w).or_insert(i64::MIN);
        *m = (*m).max(b.price);
    }
    let reference = bids(&ev)
        .iter()
        .filter(|b| max[&floor_to(b.date_time_ms * MS, size)] == b.price)
        .map(|b| {
            vec![
                V::I(b.auction),
                V::I(b.price),
                V::I(b.bidder),
                V::I(b.date_time_ms),
            ]
        })
        .collect();
    check(
        Query::Q7,
        &["auction", "price", "bidder", "date_time"],
        reference,
    );
}

#[test]
fn q8_finds_new_sellers_per_window() {
    let ev = events(&config(EVENTS));
    let size = nanos(TUMBLE_10S);
    let sellers: std::collections::HashSet<(i64, i64)> = auctions(&ev)
        .iter()
        .map(|a| (a.seller, floor_to(a.date_time_ms * MS, size)))
        .collect();
    let reference = people(&ev)
        .iter()
        .filter_map(|p| {
            let w = floor_to(p.date_time_ms * MS, size);
            sellers
                .contains(&(p.id, w))
                .then(|| vec![V::I(p.id), V::S(p.name.clone()), V::I(w)])
        })
        .collect();
    check(Query::Q8, &["id", "name", "window_start"], reference);
}

#[test]
fn q11_counts_bids_per_session() {
    let ev = events(&config(EVENTS));
    let gap = nanos(Q11_GAP);
    let mut by_bidder: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for b in bids(&ev) {
        by_bidder
            .entry(b.bidder)
            .or_default()
            .push(b.date_time_ms * MS);
    }
    let mut reference = Vec::new();
    for (bidder, mut times) in by_bidder {
        times.sort();
        let (mut start, mut last, mut n) = (times[0], times[0], 0);
        for t in times {
            if t >= last + gap {
                reference.push(vec![V::I(bidder), V::I(n), V::I(start), V::I(last + gap)]);
                start = t;
                n = 0;
            }
            last = t;
            n += 1;
        }
        reference.push(vec![V::I(bidder), V::I(n), V::I(start), V::I(last + gap)]);
    }
    check(
        Query::Q11,
        &["bidder", "bid_count", "window_start", "window_end"],
        reference,
    );
}
