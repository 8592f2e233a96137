//! Generated events as plain values, for reference implementations and tests (the
//! source itself writes them straight into Arrow columns).

use super::generate::{EventGenerator, EventSink};

/// A generated event as plain values, for reference implementations and tests.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A person.
    Person(Person),
    /// An auction.
    Auction(Auction),
    /// A bid.
    Bid(Bid),
}

/// A person, as plain values.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct Person {
    pub id: i64,
    pub name: String,
    pub email_address: String,
    pub credit_card: String,
    pub city: String,
    pub state: String,
    pub date_time_ms: i64,
    pub extra: String,
}

/// An auction, as plain values.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct Auction {
    pub id: i64,
    pub item_name: String,
    pub description: String,
    pub initial_bid: i64,
    pub reserve: i64,
    pub date_time_ms: i64,
    pub expires_ms: i64,
    pub seller: i64,
    pub category: i64,
    pub extra: String,
}

/// A bid, as plain values.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct Bid {
    pub auction: i64,
    pub bidder: i64,
    pub price: i64,
    pub channel: String,
    pub url: String,
    pub date_time_ms: i64,
    pub extra: String,
}

#[derive(Default)]
struct Collect(Option<Event>);

impl EventSink for Collect {
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
        self.0 = Some(Event::Person(Person {
            id,
            name: name.into(),
            email_address: email.into(),
            credit_card: credit_card.into(),
            city: city.into(),
            state: state.into(),
            date_time_ms,
            extra: extra.into(),
        }));
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
        self.0 = Some(Event::Auction(Auction {
            id,
            item_name: item_name.into(),
            description: description.into(),
            initial_bid,
            reserve,
            date_time_ms,
            expires_ms,
            seller,
            category,
            extra: extra.into(),
        }));
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
        self.0 = Some(Event::Bid(Bid {
            auction,
            bidder,
            price,
            channel: channel.into(),
            url: url.into(),
            date_time_ms,
            extra: extra.into(),
        }));
    }
}

impl EventGenerator {
    /// Event `e` as plain values (slow; for tests and reference implementations).
    pub fn event(&self, e: u64) -> Event {
        let mut collect = Collect::default();
        self.generate(e, &mut collect);
        match collect.0 {
            Some(event) => event,
            None => unreachable!("every event number generates exactly one event"),
        }
    }
}
