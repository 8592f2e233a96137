//! Interval joins checked per pair: the time condition a pair must meet, and per stored
//! row whether it met it with some row of the other side. In an outer interval join a
//! row of an outer side that never did is emitted padded with NULLs when the watermark
//! passes its bound and it leaves the state, so the output stays append-only
//! (docs/engine.md, "Changelog streams").

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
/// per batch its oldest event time and how many of its rows never joined.
#[derive(Default)]
pub(super) struct MatchedRows {
    times: Vec<ScalarBuffer<i64>>,
    matched: Vec<Vec<bool>>,
    /// `EventTime::MAX` for an empty batch.
    oldest: Vec<i64>,
    unmatched: Vec<usize>,
}

impl MatchedRows {
    /// A stored batch with event times `times`, none matched yet.
    pub(super) fn push(&mut self, times: ScalarBuffer<i64>) {
        (self.oldest).push(times.iter().copied().min().unwrap_or(EventTime::MAX));
        self.unmatched.push(times.len());
        self.matched.push(vec![false; times.len()]);
        self.times.push(times);
    }

    pub(super) fn time(&self, batch: usize, row: usize) -> i64 {
        self.times[batch][row]
    }

    pub(super) fn mark(&mut self, batch: usize, row: usize) {
        let flag = &mut self.matched[batch][row];
        if !*flag {
            *flag = true;
            self.unmatched[batch] -= 1;
        }
    }

    /// The flags of stored batch `batch`.
    pub(super) fn flags(&self, batch: usize) -> &[bool] {
        &self.matched[batch]
    }

    /// Sets the flags of the newest stored batch (restoring it).
    pub(super) fn set_last(&mut self, flags: &BooleanArray) {
        if let (Some(last), Some(unmatched)) = (self.matched.last_mut(), self.unmatched.last_mut())
        {
            for (i, slot) in last.iter_mut().enumerate() {
                *slot = flags.is_valid(i) && flags.value(i);
            }
            *unmatched = last.iter().filter(|m| !**m).count();
        }
    }

    /// Every batch's flags, leaving none (the side is being compacted).
    pub(super) fn take(&mut self) -> Vec<Vec<bool>> {
        self.times.clear();
        self.oldest.clear();
        self.unmatched.clear();
        std::mem::take(&mut self.matched)
    }

    /// Puts back the flags of the batches re-stored after a compaction, in order.
    pub(super) fn restore_flags(&mut self, flags: Vec<Vec<bool>>) {
        for (i, f) in flags.into_iter().enumerate() {
            self.unmatched[i] = f.iter().filter(|m| !**m).count();
            self.matched[i] = f;
        }
    }

    /// The oldest event time of a stored batch holding a row that never joined (the
    /// rows that may still leave padded), if any does.
    pub(super) fn oldest_unmatched(&self) -> Option<EventTime> {
        (self.oldest.iter().zip(&self.unmatched))
            .filter(|(_, unmatched)| **unmatched > 0)
            .map(|(oldest, _)| *oldest)
            .min()
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
    fn only_batches_with_rows_that_never_joined_hold_the_watermark() {
        let mut rows = MatchedRows::default();
        rows.push(ScalarBuffer::from(vec![10, 5]));
        rows.push(ScalarBuffer::from(vec![20]));
        assert_eq!(rows.oldest_unmatched(), Some(5));
        rows.mark(0, 0);
        assert_eq!(
            rows.oldest_unmatched(),
            Some(5),
            "row 1 at 5 may still leave padded"
        );
        rows.mark(0, 1);
        rows.mark(0, 1);
        assert_eq!(rows.oldest_unmatched(), Some(20));
        rows.set_last(&BooleanArray::from(vec![true]));
        assert_eq!(rows.oldest_unmatched(), None);
        // Compacted and put back: the counts follow the flags.
        let flags = rows.take();
        rows.push(ScalarBuffer::from(vec![10, 5]));
        rows.restore_flags(vec![vec![true, false]]);
        assert_eq!(flags.len(), 2);
        assert_eq!(rows.oldest_unmatched(), Some(5));
    }

    #[test]
    fn describe_shows_negative_bounds_and_strictness() {
        let mut c = between(-1_000_000_000, 2_000_000_000);
        c.upper.strict = true;
        assert_eq!(c.describe(), "right - left in [-1s, 2s)");
    }
}
