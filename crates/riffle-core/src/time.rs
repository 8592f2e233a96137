//! Event time and watermarks.

/// Event time in nanoseconds since the Unix epoch, UTC.
pub type EventTime = i64;

/// Progress of event time on one channel.
///
/// A watermark `t` promises that no later row on that channel has an event time `<= t`
/// (rows that break the promise are late). An idle channel does not hold back the
/// minimum taken over a task's inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Watermark {
    /// All rows with event time `<= t` have been seen.
    EventTime(EventTime),
    /// The channel has had no data for the idle timeout; ignore it until it speaks again.
    Idle,
}

impl Watermark {
    /// The watermark that closes every window: sent when bounded input ends.
    pub const MAX: Watermark = Watermark::EventTime(i64::MAX);
}

/// Nanoseconds in one millisecond.
pub const NANOS_PER_MILLI: i64 = 1_000_000;
/// Nanoseconds in one second.
pub const NANOS_PER_SECOND: i64 = 1_000_000_000;
