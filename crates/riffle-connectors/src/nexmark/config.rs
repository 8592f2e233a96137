//! Generator settings.

/// How the Nexmark generator behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct NexmarkConfig {
    /// Total events (persons + auctions + bids) to generate; `None` is unbounded.
    pub events: Option<u64>,
    /// Events per second of *event time* (not wall time): sets the inter-event delay.
    pub first_event_rate: u64,
    /// Event time of event 0, milliseconds since the Unix epoch.
    pub base_time_ms: i64,
    /// Out-of-order group size (1 = in order).
    pub out_of_order_group_size: u64,
    /// Events per block: a block is the unit of splitting and of output batches.
    pub block_events: u64,
    /// At most this many events per second of *wall* time over all subtasks (`None`:
    /// as fast as possible). For demos and tests of long-running jobs; not part of what
    /// the pipeline computes, so a resumed run may change it.
    pub max_events_per_second: Option<u64>,
}

impl Default for NexmarkConfig {
    fn default() -> Self {
        Self {
            events: Some(1_000_000),
            first_event_rate: 10_000_000,
            // 2025-01-01T00:00:00Z: fixed so runs are reproducible.
            base_time_ms: 1_735_689_600_000,
            out_of_order_group_size: 1,
            block_events: 8_192,
            max_events_per_second: None,
        }
    }
}

impl NexmarkConfig {
    /// Microseconds of event time between two consecutive events.
    pub fn inter_event_delay_us(&self) -> f64 {
        1_000_000.0 / self.first_event_rate as f64
    }

    /// Event time of event `n`, in milliseconds (deterministic in `n`, so a replay after a restore regenerates the same events).
    pub fn event_time_ms(&self, n: u64) -> i64 {
        let g = self.out_of_order_group_size.max(1);
        let time_index = if g == 1 {
            n
        } else {
            (n / g) * g + (n.wrapping_mul(953)) % g
        };
        // Truncation is floor for the non-negative product (and is not a call into libm).
        let offset_us = (time_index as f64 * self.inter_event_delay_us()) as i64;
        self.base_time_ms + offset_us / 1000
    }

    /// Microseconds of event time spanned by about 1667 events: the auction horizon.
    pub fn auction_horizon_us(&self) -> f64 {
        (100.0 * 50.0 / 3.0) * self.inter_event_delay_us()
    }
}
