//! Event generation: one function per entity, writing into any [`EventSink`].
//!
//! The columnar source and the plain-struct API used by reference tests share these
//! functions, so both see exactly the same events.

use super::config::NexmarkConfig;
use super::rng::EventRng;

const FIRST_PERSON_ID: i64 = 1000;
const FIRST_AUCTION_ID: i64 = 1000;
const FIRST_CATEGORY_ID: i64 = 10;
const CATEGORIES: u64 = 5;
const PROPORTION_DENOMINATOR: u64 = 50;
const HOT_RATIO: i64 = 100;
const CHANNELS: u64 = 10_000;
const POOL_BYTES: usize = 1 << 16;

const FIRST_NAMES: [&str; 11] = [
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter",
];
const LAST_NAMES: [&str; 9] = [
    "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris",
];
const CITIES: [&str; 10] = [
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
];
const STATES: [&str; 6] = ["AZ", "CA", "ID", "OR", "WA", "WY"];
const HOT_CHANNELS: [&str; 4] = ["Google", "Facebook", "Baidu", "Apple"];
const HOT_URLS: [&str; 4] = [
    "https://www.nexmark.com/googl/item.htm?query=1",
    "https://www.nexmark.com/fcbk/item.htm?query=1",
    "https://www.nexmark.com/baidu/item.htm?query=1",
    "https://www.nexmark.com/apple/item.htm?query=1",
];

/// Average serialized sizes the `extra` field pads towards.
const PERSON_AVG_BYTES: u64 = 200;
const AUCTION_AVG_BYTES: u64 = 500;
const BID_AVG_BYTES: u64 = 100;

/// Which entity an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// `e % 50 == 0`.
    Person,
    /// `e % 50` in `1..=3`.
    Auction,
    /// The other 46 of every 50.
    Bid,
}

impl EventKind {
    /// The kind of event `e`.
    pub fn of(e: u64) -> EventKind {
        match e % PROPORTION_DENOMINATOR {
            0 => EventKind::Person,
            1..=3 => EventKind::Auction,
            _ => EventKind::Bid,
        }
    }
}

/// Receives generated events field by field (strings borrowed, to avoid allocation).
pub trait EventSink {
    /// A person.
    #[allow(clippy::too_many_arguments)]
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
    );
    /// An auction.
    #[allow(clippy::too_many_arguments)]
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
    );
    /// Whether the sink keeps `extra`, the padding text and the last field of every
    /// event. When it does not, the generator passes `""` without drawing it: nothing is
    /// drawn after it, so every other field is the same either way.
    fn keeps_extra(&self) -> bool {
        true
    }
    /// A bid.
    #[allow(clippy::too_many_arguments)]
    fn bid(
        &mut self,
        auction: i64,
        bidder: i64,
        price: i64,
        channel: &str,
        url: &str,
        date_time_ms: i64,
        extra: &str,
    );
}

/// Generates Nexmark events by number. Cheap to share: the tables it precomputes are
/// derived from fixed seeds.
pub struct EventGenerator {
    config: NexmarkConfig,
    /// Letters a–z with a 1-in-13 chance of a space: slices of it are random strings.
    text_pool: String,
    /// Letters only, for email parts.
    letter_pool: String,
    full_names: Vec<String>,
    channel_names: Vec<String>,
    channel_urls: Vec<String>,
}

fn pool(salt: u64, spaces: bool) -> String {
    let mut rng = EventRng::for_salt(salt);
    (0..POOL_BYTES)
        .map(|_| {
            if spaces && rng.one_in(13) {
                ' '
            } else {
                char::from(b'a' + rng.below(26) as u8)
            }
        })
        .collect()
}

/// `len` characters of `pool` from a random place. The pools hold ASCII only, so any
/// byte range is text: slicing checks two boundaries where `from_utf8` read every byte.
fn pool_str<'a>(pool: &'a str, rng: &mut EventRng, len: usize) -> &'a str {
    let start = rng.below((pool.len() - len) as u64) as usize;
    pool.get(start..start + len).unwrap_or_default()
}

impl EventGenerator {
    /// A generator for `config`.
    pub fn new(config: NexmarkConfig) -> Self {
        let text_pool = pool(1, true);
        let letter_pool = pool(2, false);
        let full_names = FIRST_NAMES
            .iter()
            .flat_map(|f| LAST_NAMES.iter().map(move |l| format!("{f} {l}")))
            .collect();
        let mut rng = EventRng::for_salt(3);
        let mut channel_names = Vec::with_capacity(CHANNELS as usize);
        let mut channel_urls = Vec::with_capacity(CHANNELS as usize);
        for i in 0..CHANNELS {
            channel_names.push(format!("channel-{i}"));
            let a_len = 3 + rng.below(3) as usize;
            let a = pool_str(&letter_pool, &mut rng, a_len).to_string();
            let b_len = 3 + rng.below(3) as usize;
            let b = pool_str(&letter_pool, &mut rng, b_len).to_string();
            let c_len = 3 + rng.below(3) as usize;
            let c = pool_str(&letter_pool, &mut rng, c_len).to_string();
            channel_urls.push(format!(
                "https://www.nexmark.com/{a}/{b}/{c}/item.htm?query=1&channel_id={}",
                (i as u32).reverse_bits()
            ));
        }
        Self {
            config,
            text_pool,
            letter_pool,
            full_names,
            channel_names,
            channel_urls,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &NexmarkConfig {
        &self.config
    }

    /// Id of the newest person at or before event `e`.
    fn last_person_id(e: u64) -> i64 {
        (e / PROPORTION_DENOMINATOR) as i64 + FIRST_PERSON_ID
    }

    /// Id of the newest auction at or before event `e` (the first auction id if none yet).
    fn last_auction_id(e: u64) -> i64 {
        let block = (e / PROPORTION_DENOMINATOR) as i64;
        let within = (e % PROPORTION_DENOMINATOR) as i64;
        let offset = match within {
            0 => block * 3 - 1,
            1..=3 => block * 3 + within - 1,
            _ => block * 3 + 2,
        };
        FIRST_AUCTION_ID + offset.max(0)
    }

    /// Nexmark's price in cents, `round(10^(6u) · 100)` for a uniform `u`: log-uniform
    /// from 1.00 to 1,000,000.00. `exp` in place of `powf`, which was a tenth of the
    /// generator's time; it can differ from `powf` in the last bits, which could move a
    /// price by a cent (none in a test's million draws). Adding ½ and truncating is `round`
    /// exactly for positive values below 2^52 (and is not a call into libm).
    fn price(rng: &mut EventRng) -> i64 {
        const SIX_LN_10: f64 = 6.0 * std::f64::consts::LN_10;
        ((rng.unit() * SIX_LN_10).exp() * 100.0 + 0.5) as i64
    }

    /// The padding text of an event whose other fields take `current` bytes; `""`,
    /// drawn from nothing, when the sink does not keep it (`kept`, see
    /// [`EventSink::keeps_extra`]).
    fn extra<'a>(&'a self, kept: bool, rng: &mut EventRng, current: u64, average: u64) -> &'a str {
        if !kept {
            return "";
        }
        let target = (average as f64 * (0.8 + 0.4 * rng.unit())) as u64;
        let len = target.saturating_sub(current) as usize;
        pool_str(&self.text_pool, rng, len)
    }

    fn random_text<'a>(&'a self, rng: &mut EventRng, max_len: u64) -> &'a str {
        let len = 3 + rng.below(max_len - 2) as usize;
        pool_str(&self.text_pool, rng, len)
    }

    /// Generates event `e` into `sink`.
    pub fn generate(&self, e: u64, sink: &mut impl EventSink) {
        match EventKind::of(e) {
            EventKind::Person => self.person(e, sink),
            EventKind::Auction => self.auction(e, sink),
            EventKind::Bid => self.bid(e, sink),
        }
    }

    fn person(&self, e: u64, sink: &mut impl EventSink) {
        let mut rng = EventRng::for_event(e);
        let id = Self::last_person_id(e);
        let name = &self.full_names[rng.below(self.full_names.len() as u64) as usize];
        let mut email = String::with_capacity(16);
        let user_len = 3 + rng.below(5) as usize;
        email.push_str(pool_str(&self.letter_pool, &mut rng, user_len));
        email.push('@');
        let host_len = 3 + rng.below(3) as usize;
        email.push_str(pool_str(&self.letter_pool, &mut rng, host_len));
        email.push_str(".com");
        let mut card = [0u8; 19];
        for group in 0..4 {
            let mut v = rng.below(10_000);
            for digit in (0..4).rev() {
                card[group * 5 + digit] = b'0' + (v % 10) as u8;
                v /= 10;
            }
            if group < 3 {
                card[group * 5 + 4] = b' ';
            }
        }
        let card = std::str::from_utf8(&card).unwrap_or_default();
        let city = CITIES[rng.below(CITIES.len() as u64) as usize];
        let state = STATES[rng.below(STATES.len() as u64) as usize];
        let date_time = self.config.event_time_ms(e);
        let size = 8 + name.len() + email.len() + card.len() + city.len() + state.len() + 8;
        let extra = self.extra(sink.keeps_extra(), &mut rng, size as u64, PERSON_AVG_BYTES);
        sink.person(id, name, &email, card, city, state, date_time, extra);
    }

    fn auction(&self, e: u64, sink: &mut impl EventSink) {
        let mut rng = EventRng::for_event(e);
        let block = (e / PROPORTION_DENOMINATOR) as i64;
        let id = FIRST_AUCTION_ID + block * 3 + (e % PROPORTION_DENOMINATOR) as i64 - 1;
        let last_person = Self::last_person_id(e);
        let seller = if rng.below(4) < 3 {
            (last_person / HOT_RATIO) * HOT_RATIO
        } else {
            let low = (last_person - 1000).max(FIRST_PERSON_ID);
            low + rng.below((last_person + 10 - low + 1) as u64) as i64
        };
        let category = FIRST_CATEGORY_ID + rng.below(CATEGORIES) as i64;
        let initial_bid = Self::price(&mut rng);
        let reserve = initial_bid + Self::price(&mut rng);
        let date_time = self.config.event_time_ms(e);
        let horizon_us = self.config.auction_horizon_us();
        let expires = date_time + 1 + ((rng.unit() * 2.0 * horizon_us) as i64) / 1000;
        let item_name = self.random_text(&mut rng, 20);
        let description = self.random_text(&mut rng, 100);
        let size = 8 + item_name.len() + description.len() + 8 * 6;
        let extra = self.extra(sink.keeps_extra(), &mut rng, size as u64, AUCTION_AVG_BYTES);
        sink.auction(
            id,
            item_name,
            description,
            initial_bid,
            reserve,
            date_time,
            expires,
            seller,
            category,
            extra,
        );
    }

    fn bid(&self, e: u64, sink: &mut impl EventSink) {
        let mut rng = EventRng::for_event(e);
        let last_auction = Self::last_auction_id(e);
        let auction = if rng.below(2) == 0 {
            (last_auction / HOT_RATIO) * HOT_RATIO
        } else {
            let low = (last_auction - 100).max(FIRST_AUCTION_ID);
            low + rng.below((last_auction + 10 - low + 1) as u64) as i64
        };
        let last_person = Self::last_person_id(e);
        let bidder = if rng.below(4) < 3 {
            (last_person / HOT_RATIO) * HOT_RATIO + 1
        } else {
            let low = (last_person - 999).max(FIRST_PERSON_ID);
            low + rng.below((last_person - low + 1) as u64) as i64
        };
        let price = Self::price(&mut rng);
        let (channel, url) = if rng.below(2) == 0 {
            let i = rng.below(HOT_CHANNELS.len() as u64) as usize;
            (HOT_CHANNELS[i], HOT_URLS[i])
        } else {
            let i = rng.below(CHANNELS) as usize;
            (
                self.channel_names[i].as_str(),
                self.channel_urls[i].as_str(),
            )
        };
        let date_time = self.config.event_time_ms(e);
        let size = 8 * 4 + channel.len() + url.len();
        let extra = self.extra(sink.keeps_extra(), &mut rng, size as u64, BID_AVG_BYTES);
        sink.bid(auction, bidder, price, channel, url, date_time, extra);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nexmark::events::{Bid, Event};

    fn generator() -> EventGenerator {
        EventGenerator::new(NexmarkConfig::default())
    }

    #[test]
    fn prices_are_powf_prices_but_for_a_cent_in_rare_draws() {
        let mut rng = EventRng::for_salt(7);
        let mut off_by_a_cent = 0;
        for _ in 0..1_000_000 {
            let mut again = rng.clone();
            let price = EventGenerator::price(&mut rng);
            let by_powf = (10f64.powf(again.unit() * 6.0) * 100.0).round() as i64;
            match (price - by_powf).abs() {
                0 => {}
                1 => off_by_a_cent += 1,
                d => panic!("{price} differs from {by_powf} by {d}"),
            }
            assert!((100..=100_000_000).contains(&price), "{price}");
        }
        assert!(off_by_a_cent <= 1, "{off_by_a_cent} prices off by a cent");
    }

    #[test]
    fn a_bids_channel_and_url_belong_together() {
        let g = generator();
        let mut cold = 0;
        for e in 0..20_000 {
            let Event::Bid(b) = g.event(e) else { continue };
            if let Some(i) = b.channel.strip_prefix("channel-") {
                let i: u32 = i.parse().unwrap();
                let id = format!("&channel_id={}", i.reverse_bits());
                assert!(b.url.ends_with(&id), "{} {}", b.channel, b.url);
                assert!(b.url.starts_with("https://www.nexmark.com/"));
                cold += 1;
            } else {
                let hot = HOT_CHANNELS.iter().position(|c| *c == b.channel).unwrap();
                assert_eq!(b.url, HOT_URLS[hot]);
            }
        }
        assert!(cold > 5_000, "half the bids draw from the channel table");
    }

    #[test]
    fn proportions_are_1_3_46() {
        let kinds: Vec<_> = (0..50).map(EventKind::of).collect();
        assert_eq!(kinds.iter().filter(|k| **k == EventKind::Person).count(), 1);
        assert_eq!(
            kinds.iter().filter(|k| **k == EventKind::Auction).count(),
            3
        );
        assert_eq!(kinds.iter().filter(|k| **k == EventKind::Bid).count(), 46);
    }

    #[test]
    fn ids_follow_the_event_number() {
        let g = generator();
        assert!(matches!(g.event(0), Event::Person(p) if p.id == 1000));
        assert!(matches!(g.event(50), Event::Person(p) if p.id == 1001));
        assert!(matches!(g.event(1), Event::Auction(a) if a.id == 1000));
        assert!(matches!(g.event(53), Event::Auction(a) if a.id == 1005));
    }

    #[test]
    fn values_stay_in_their_domains() {
        let g = generator();
        for e in 0..20_000 {
            match g.event(e) {
                Event::Bid(b) => {
                    assert!((100..=100_000_000).contains(&b.price), "{b:?}");
                    assert!(b.auction >= 1000 && b.bidder >= 1000);
                    assert!(b.url.starts_with("https://www.nexmark.com/"));
                }
                Event::Auction(a) => {
                    assert!((10..15).contains(&a.category));
                    assert!(a.reserve > a.initial_bid && a.expires_ms > a.date_time_ms);
                }
                Event::Person(p) => {
                    assert!(STATES.contains(&p.state.as_str()));
                    assert!(p.email_address.ends_with(".com") && p.credit_card.len() == 19);
                }
            }
        }
    }

    #[test]
    fn event_time_follows_rate_and_disorder() {
        let mut c = NexmarkConfig {
            first_event_rate: 1000,
            ..NexmarkConfig::default()
        };
        assert_eq!(c.event_time_ms(5) - c.event_time_ms(0), 5);
        c.out_of_order_group_size = 10;
        let times: Vec<i64> = (0..10)
            .map(|n| c.event_time_ms(n) - c.base_time_ms)
            .collect();
        let mut sorted = times.clone();
        sorted.sort();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
        assert_ne!(times, sorted);
    }

    #[test]
    fn hot_items_dominate() {
        let g = generator();
        let bids: Vec<Bid> = (0..50_000)
            .filter_map(|e| match g.event(e) {
                Event::Bid(b) => Some(b),
                _ => None,
            })
            .collect();
        let hot = bids.iter().filter(|b| b.auction % 100 == 0).count();
        assert!(
            hot * 10 > bids.len() * 4,
            "hot auctions {hot} of {}",
            bids.len()
        );
    }
}
