//! Outer interval joins: the time condition a pair must meet, and per stored row whether
//! it met it with some row of the other side. A row of an outer side that never did is
//! emitted padded with NULLs when the watermark passes its bound and it leaves the
//! state, so the output stays append-only (docs/engine.md, "Outer interval joins").

use riffle_core::arrow::array::{Array, BooleanArray};
use riffle_core::arrow::buffer::ScalarBuffer;
use riffle_core::EventTime;
use std::time::Duration;

/// One end of the allowed range of `right.time - left.time`, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeBound {
    pub nanos: i64,
    /// `<` / `>` instead of `<=` / `>=`.
    pub strict: bool,
}

/// `right.time - left.time` within `[lower, upper]`: the condition of an interval join,
/// e.g. `r.t BETWEEN l.t - INTERVAL '1' SECOND AND l.t + INTERVAL '2' SECOND` is
/// `lower = -1 s`, `upper = 2 s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntervalCondition {
    pub lower: TimeBound,
    pub upper: TimeBound,
}

impl IntervalCondition {
    /// Whether a left row at `left` and a right row at `right` (event times) may join.
    pub fn holds(&self, left: i64, right: i64) -> bool {
        let d = i128::from(right) - i128::from(left);
        let (lo, hi) = (i128::from(self.lower.nanos), i128::from(self.upper.nanos));
        let above = if self.lower.strict { d > lo } else { d >= lo };
        let below = if self.upper.strict { d < hi } else { d <= hi };
        above && below
    }

    /// How long past its event time each side's rows can still be matched by a row
    /// that arrives in time: a left row at `t` by right rows up to `t + upper`, a right
    /// row at `t` by left rows from `t - lower` on.
    pub fn retention(&self) -> (Duration, Duration) {
        let positive = |n: i64| Duration::from_nanos(u64::try_from(n.max(0)).unwrap_or(0));
        (
            positive(self.upper.nanos),
            positive(self.lower.nanos.saturating_neg()),
        )
    }

    /// `right - left in [-1s, 2s)`, for `explain`.
    pub fn describe(&self) -> String {
        let show = |n: i64| match n {
            n if n < 0 => format!("-{}", crate::window::display_nanos(n.saturating_neg())),
            n => crate::window::display_nanos(n),
        };
        format!(
            "right - left in {}{}, {}{}",
            if self.lower.strict { "(" } else { "[" },
            show(self.lower.nanos),
            show(self.upper.nanos),
            if self.upper.strict { ")" } else { "]" },
        )
    }
}

/// One side's stored rows as the time condition sees them, parallel to the stored
/// batches: their event times, whether each row joined some row of the other side, and
/// each batch's oldest event time.
#[derive(Default)]
pub(super) struct MatchedRows {
    times: Vec<ScalarBuffer<i64>>,
    matched: Vec<Vec<bool>>,
    oldest: Vec<i64>,
}

impl MatchedRows {
    /// A stored batch with event times `times`, none matched yet.
    pub(super) fn push(&mut self, times: ScalarBuffer<i64>) {
        if let Some(oldest) = times.iter().copied().min() {
            self.oldest.push(oldest);
        }
        self.matched.push(vec![false; times.len()]);
        self.times.push(times);
    }

    pub(super) fn time(&self, batch: usize, row: usize) -> i64 {
        self.times[batch][row]
    }

    pub(super) fn mark(&mut self, batch: usize, row: usize) {
        self.matched[batch][row] = true;
    }

    /// The flags of stored batch `batch`.
    pub(super) fn flags(&self, batch: usize) -> &[bool] {
        &self.matched[batch]
    }

    /// Sets the flags of the newest stored batch (restoring it).
    pub(super) fn set_last(&mut self, flags: &BooleanArray) {
        if let Some(last) = self.matched.last_mut() {
            for (i, slot) in last.iter_mut().enumerate() {
                *slot = flags.is_valid(i) && flags.value(i);
            }
        }
    }

    /// Every batch's flags, leaving none (the side is being compacted).
    pub(super) fn take(&mut self) -> Vec<Vec<bool>> {
        self.times.clear();
        self.oldest.clear();
        std::mem::take(&mut self.matched)
    }

    /// Puts back the flags of the batches re-stored after a compaction, in order.
    pub(super) fn restore_flags(&mut self, flags: Vec<Vec<bool>>) {
        for (i, f) in flags.into_iter().enumerate() {
            self.matched[i] = f;
        }
    }

    /// The oldest event time stored, if any row is.
    pub(super) fn oldest(&self) -> Option<EventTime> {
        self.oldest.iter().copied().min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn between(lower: i64, upper: i64) -> IntervalCondition {
        IntervalCondition {
            lower: TimeBound {
                nanos: lower,
                strict: false,
            },
            upper: TimeBound {
                nanos: upper,
                strict: false,
            },
        }
    }

    #[test]
    fn a_pair_joins_when_the_right_time_is_within_the_bounds_of_the_left() {
        let c = between(-10, 20);
        assert!(c.holds(100, 90));
        assert!(c.holds(100, 120));
        assert!(!c.holds(100, 89));
        assert!(!c.holds(100, 121));
    }

    #[test]
    fn strict_bounds_leave_out_their_ends() {
        let mut c = between(-10, 20);
        c.lower.strict = true;
        c.upper.strict = true;
        assert!(!c.holds(100, 90));
        assert!(!c.holds(100, 120));
        assert!(c.holds(100, 91));
    }

    #[test]
    fn retention_is_how_far_the_other_side_may_reach_and_never_negative() {
        assert_eq!(
            between(-10, 20).retention(),
            (Duration::from_nanos(20), Duration::from_nanos(10))
        );
        // Right rows only after the left row's time: a right row can be dropped at once.
        assert_eq!(
            between(5, 20).retention(),
            (Duration::from_nanos(20), Duration::ZERO)
        );
    }

    #[test]
    fn extreme_bounds_do_not_overflow() {
        let c = between(i64::MIN, i64::MAX);
        assert!(c.holds(0, i64::MIN));
        assert!(c.holds(0, i64::MAX));
        assert_eq!(c.retention().0, Duration::from_nanos(i64::MAX as u64));
    }

    #[test]
    fn describe_shows_negative_bounds_and_strictness() {
        let mut c = between(-1_000_000_000, 2_000_000_000);
        c.upper.strict = true;
        assert_eq!(c.describe(), "right - left in [-1s, 2s)");
    }
}
