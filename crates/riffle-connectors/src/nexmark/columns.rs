//! Column builders for one Nexmark table: the generator writes each event's values
//! straight into them.

use super::generate::EventSink;
use super::schema::NexmarkTable;
use riffle_core::arrow::array::{
    ArrayRef, Int64Array, StringBuilder, TimestampMillisecondArray, TimestampNanosecondArray,
};
use riffle_core::time::NANOS_PER_MILLI;
use std::sync::Arc;

/// Column builders for one table.
pub(super) struct Columns {
    ints: Vec<Vec<i64>>,
    strings: Vec<StringBuilder>,
    /// Per text column: whether its values are kept (see `reading_only`).
    texts_read: Vec<bool>,
    times_ms: Vec<Vec<i64>>,
    table: NexmarkTable,
}

impl Columns {
    fn new(
        table: NexmarkTable,
        rows: usize,
        ints: usize,
        strings: &[usize],
        times: usize,
        texts_read: &[bool],
    ) -> Self {
        Self {
            ints: (0..ints).map(|_| Vec::with_capacity(rows)).collect(),
            strings: strings
                .iter()
                .zip(texts_read)
                .map(|(bytes, read)| {
                    StringBuilder::with_capacity(rows, rows * bytes * usize::from(*read))
                })
                .collect(),
            texts_read: texts_read.to_vec(),
            times_ms: (0..times).map(|_| Vec::with_capacity(rows)).collect(),
            table,
        }
    }

    pub(super) fn bids(rows: usize, texts_read: &[bool]) -> Self {
        Self::new(NexmarkTable::Bid, rows, 3, &[10, 60, 40], 1, texts_read)
    }

    pub(super) fn auctions(rows: usize, texts_read: &[bool]) -> Self {
        Self::new(
            NexmarkTable::Auction,
            rows,
            5,
            &[12, 50, 400],
            2,
            texts_read,
        )
    }

    pub(super) fn persons(rows: usize, texts_read: &[bool]) -> Self {
        Self::new(
            NexmarkTable::Person,
            rows,
            1,
            &[12, 14, 19, 10, 2, 120],
            1,
            texts_read,
        )
    }

    /// Appends one row's text columns, in order.
    fn texts<const N: usize>(&mut self, values: [&str; N]) {
        for ((b, v), read) in self.strings.iter_mut().zip(values).zip(&self.texts_read) {
            b.append_value(if *read { v } else { "" });
        }
    }

    pub(super) fn finish(mut self) -> Vec<ArrayRef> {
        let mut ints = self
            .ints
            .drain(..)
            .map(|v| Arc::new(Int64Array::from(v)) as ArrayRef);
        let mut strings = self
            .strings
            .iter_mut()
            .map(|b| Arc::new(b.finish()) as ArrayRef);
        let times: Vec<Vec<i64>> = self.times_ms.drain(..).collect();
        let ts_ns: ArrayRef = Arc::new(
            TimestampNanosecondArray::from(
                times[0]
                    .iter()
                    .map(|ms| ms * NANOS_PER_MILLI)
                    .collect::<Vec<_>>(),
            )
            .with_timezone("UTC"),
        );
        let mut times = times
            .into_iter()
            .map(|v| Arc::new(TimestampMillisecondArray::from(v)) as ArrayRef);
        let mut next_int = || ints.next().expect("int column");
        let mut next_time = || times.next().expect("time column");
        let mut out: Vec<ArrayRef> = Vec::new();
        match self.table {
            NexmarkTable::Bid => {
                out.extend([next_int(), next_int(), next_int()]);
                out.extend([strings.next(), strings.next()].into_iter().flatten());
                out.push(next_time());
                out.extend(strings.next());
            }
            NexmarkTable::Auction => {
                out.push(next_int());
                out.extend([strings.next(), strings.next()].into_iter().flatten());
                out.extend([next_int(), next_int()]);
                out.extend([next_time(), next_time()]);
                out.extend([next_int(), next_int()]);
                out.extend(strings.next());
            }
            NexmarkTable::Person => {
                out.push(next_int());
                out.extend(
                    [
                        strings.next(),
                        strings.next(),
                        strings.next(),
                        strings.next(),
                        strings.next(),
                    ]
                    .into_iter()
                    .flatten(),
                );
                out.push(next_time());
                out.extend(strings.next());
            }
        }
        out.push(ts_ns);
        out
    }
}

impl EventSink for Columns {
    fn keeps_extra(&self) -> bool {
        // `extra` is the last text column of every table.
        self.texts_read.last().copied().unwrap_or(true)
    }

    fn person(
        &mut self,
        id: i64,
        name: &str,
        email: &str,
        credit_card: &str,
        city: &str,
        state: &str,
        date_time_ms: i64,
        extra: &str,
    ) {
        self.ints[0].push(id);
        self.texts([name, email, credit_card, city, state, extra]);
        self.times_ms[0].push(date_time_ms);
    }

    fn auction(
        &mut self,
        id: i64,
        item_name: &str,
        description: &str,
        initial_bid: i64,
        reserve: i64,
        date_time_ms: i64,
        expires_ms: i64,
        seller: i64,
        category: i64,
        extra: &str,
    ) {
        for (col, v) in [id, initial_bid, reserve, seller, category]
            .into_iter()
            .enumerate()
        {
            self.ints[col].push(v);
        }
        self.texts([item_name, description, extra]);
        self.times_ms[0].push(date_time_ms);
        self.times_ms[1].push(expires_ms);
    }

    fn bid(
        &mut self,
        auction: i64,
        bidder: i64,
        price: i64,
        channel: &str,
        url: &str,
        date_time_ms: i64,
        extra: &str,
    ) {
        self.ints[0].push(auction);
        self.ints[1].push(bidder);
        self.ints[2].push(price);
        self.texts([channel, url, extra]);
        self.times_ms[0].push(date_time_ms);
    }
}
