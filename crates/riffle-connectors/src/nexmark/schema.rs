//! Schemas of the three Nexmark tables.

use riffle_core::arrow::datatypes::{DataType, Field, TimeUnit};
use riffle_core::StreamSchema;

/// One of the Nexmark tables; a source produces one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NexmarkTable {
    /// `person`: new sellers and bidders (2% of events).
    Person,
    /// `auction`: items for sale (6%).
    Auction,
    /// `bid`: bids on auctions (92%).
    Bid,
}

impl NexmarkTable {
    /// The table's name.
    pub fn name(self) -> &'static str {
        match self {
            NexmarkTable::Person => "person",
            NexmarkTable::Auction => "auction",
            NexmarkTable::Bid => "bid",
        }
    }

    /// Parses `person`, `auction` or `bid`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "person" => Some(NexmarkTable::Person),
            "auction" => Some(NexmarkTable::Auction),
            "bid" => Some(NexmarkTable::Bid),
            _ => None,
        }
    }

    /// The stream schema: the Nexmark fields plus `_timestamp` (= `date_time`).
    pub fn schema(self) -> StreamSchema {
        let ts = || DataType::Timestamp(TimeUnit::Millisecond, None);
        let i64f = |n: &str| Field::new(n, DataType::Int64, false);
        let strf = |n: &str| Field::new(n, DataType::Utf8, false);
        let fields = match self {
            NexmarkTable::Person => vec![
                i64f("id"),
                strf("name"),
                strf("email_address"),
                strf("credit_card"),
                strf("city"),
                strf("state"),
                Field::new("date_time", ts(), false),
                strf("extra"),
            ],
            NexmarkTable::Auction => vec![
                i64f("id"),
                strf("item_name"),
                strf("description"),
                i64f("initial_bid"),
                i64f("reserve"),
                Field::new("date_time", ts(), false),
                Field::new("expires", ts(), false),
                i64f("seller"),
                i64f("category"),
                strf("extra"),
            ],
            NexmarkTable::Bid => vec![
                i64f("auction"),
                i64f("bidder"),
                i64f("price"),
                strf("channel"),
                strf("url"),
                Field::new("date_time", ts(), false),
                strf("extra"),
            ],
        };
        StreamSchema::with_timestamp(fields)
    }
}
