//! Rates per second for the REST API. Each time the API is asked, the operators' totals
//! are kept for ten seconds; a rate is the change since the oldest reading kept, once
//! that is a second old. Nothing is sampled while nobody asks.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long readings are kept: rates are over at most this much time.
const WINDOW: Duration = Duration::from_secs(10);
/// The least time a rate is taken over.
const LEAST: Duration = Duration::from_secs(1);

/// One operator's totals at a reading.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Totals {
    pub rows_in: u64,
    pub rows_out: u64,
    /// Time blocked on full channels, summed over its subtasks.
    pub blocked: Duration,
    pub parallelism: usize,
}

/// One operator's rates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct OperatorRates {
    pub rows_in_per_second: f64,
    pub rows_out_per_second: f64,
    /// Share of its subtasks' time spent blocked on full channels (0 to 1).
    pub blocked_share: f64,
}

/// Readings of the operators' totals.
#[derive(Debug, Default)]
pub(super) struct Rates {
    readings: Mutex<VecDeque<(Instant, BTreeMap<String, Totals>)>>,
}

impl Rates {
    /// Keeps `totals` as read at `now`; returns each operator's rates since the oldest
    /// reading kept (none until one is a second old).
    pub(super) fn observe(
        &self,
        now: Instant,
        totals: BTreeMap<String, Totals>,
    ) -> BTreeMap<String, OperatorRates> {
        let mut readings = self.readings.lock().unwrap_or_else(|e| e.into_inner());
        while readings
            .front()
            .is_some_and(|(at, _)| now.saturating_duration_since(*at) > WINDOW)
        {
            readings.pop_front();
        }
        let mut rates = BTreeMap::new();
        if let Some((at, before)) = readings.front() {
            let seconds = now.saturating_duration_since(*at);
            if seconds >= LEAST {
                let seconds = seconds.as_secs_f64();
                for (id, now_totals) in &totals {
                    // A restarted attempt counts from zero: no rate across it.
                    let Some(then) = before.get(id).filter(|t| t.rows_in <= now_totals.rows_in)
                    else {
                        continue;
                    };
                    let blocked = now_totals.blocked.saturating_sub(then.blocked);
                    let parallelism = now_totals.parallelism.max(1) as f64;
                    rates.insert(
                        id.clone(),
                        OperatorRates {
                            rows_in_per_second: (now_totals.rows_in - then.rows_in) as f64
                                / seconds,
                            rows_out_per_second: now_totals.rows_out.saturating_sub(then.rows_out)
                                as f64
                                / seconds,
                            blocked_share: (blocked.as_secs_f64() / (seconds * parallelism))
                                .min(1.0),
                        },
                    );
                }
            }
        }
        readings.push_back((now, totals));
        rates
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(rows_in: u64, blocked_ms: u64) -> BTreeMap<String, Totals> {
        let t = Totals {
            rows_in,
            rows_out: rows_in / 2,
            blocked: Duration::from_millis(blocked_ms),
            parallelism: 2,
        };
        BTreeMap::from([("op".to_string(), t)])
    }

    #[test]
    fn a_rate_is_the_change_since_the_oldest_reading_a_second_old() {
        let rates = Rates::default();
        let start = Instant::now();
        assert!(
            rates.observe(start, totals(0, 0)).is_empty(),
            "no rate from one reading"
        );
        let early = rates.observe(start + Duration::from_millis(500), totals(500, 0));
        assert!(early.is_empty(), "no rate over half a second");
        let r = rates.observe(start + Duration::from_secs(2), totals(4000, 1000))["op"];
        assert_eq!(r.rows_in_per_second, 2000.0);
        assert_eq!(r.rows_out_per_second, 1000.0);
        // 1 s blocked over 2 s of 2 subtasks.
        assert_eq!(r.blocked_share, 0.25);
    }

    #[test]
    fn readings_older_than_the_window_are_forgotten() {
        let rates = Rates::default();
        let start = Instant::now();
        rates.observe(start, totals(0, 0));
        rates.observe(start + Duration::from_secs(9), totals(9000, 0));
        let r = rates.observe(start + Duration::from_secs(12), totals(12000, 0))["op"];
        // Over the last 3 s (the reading at 0 s is gone), not 12.
        assert_eq!(r.rows_in_per_second, 1000.0);
    }

    #[test]
    fn no_rate_across_a_restart() {
        let rates = Rates::default();
        let start = Instant::now();
        rates.observe(start, totals(5000, 0));
        assert!(rates
            .observe(start + Duration::from_secs(2), totals(10, 0))
            .is_empty());
    }
}
