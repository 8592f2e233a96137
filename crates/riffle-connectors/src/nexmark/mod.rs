//! The Nexmark benchmark generator (see `shared/nexmark-spec.md` for the facts it follows).
//!
//! Global event number `e`: `e % 50 == 0` is a person, `1..=3` an auction, the rest bids.
//! Every random choice for event `e` comes from a counter-based generator seeded by `e`
//! alone ([`rng::EventRng`]), so any subtask can start at any event and a replay from a
//! checkpointed offset reproduces the same events. Subtasks take blocks of events in turn
//! (block `b` goes to subtask `b % parallelism`), so all subtasks walk the same timeline.

mod columns;
mod config;
mod events;
mod generate;
mod rng;
mod schema;
mod source;

pub use config::NexmarkConfig;
pub use events::{Auction, Bid, Event, Person};
pub use generate::{EventGenerator, EventKind, EventSink};
pub use schema::NexmarkTable;
pub use source::NexmarkSourceFactory;
