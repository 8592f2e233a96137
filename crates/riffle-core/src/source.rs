//! The source trait: replayable producers of batches.

use crate::error::Result;
use crate::message::Epoch;
use crate::operator::OperatorContext;
use crate::schema::StreamSchema;
use crate::state::OperatorState;
use crate::time::EventTime;
use crate::RecordBatch;
use std::sync::Arc;

/// What a source has right now.
#[derive(Debug)]
pub enum SourcePoll {
    /// A batch of rows (with the event-time column).
    Batch(RecordBatch),
    /// Nothing available now; ask again shortly.
    Pending,
    /// Bounded input is exhausted.
    End,
}

/// One subtask of a source.
///
/// The runtime calls [`poll_next`](Source::poll_next) in a loop and injects barriers
/// between two calls; [`snapshot`](Source::snapshot) at a barrier must describe a
/// position from which a restored source reproduces exactly the rows after it.
pub trait Source: Send {
    /// The next batch.
    ///
    /// # Errors
    /// Malformed input (naming file, line and field) or unreachable storage.
    fn poll_next(&mut self) -> Result<SourcePoll>;

    /// The source's position at barrier `epoch` as state (one row per split).
    fn snapshot(&mut self, _epoch: Epoch) -> Result<OperatorState> {
        Ok(OperatorState::default())
    }

    /// How far event time has come when the source tracks it per split: the minimum
    /// over its live splits (e.g. Kafka partitions) of the newest event time each has
    /// produced. The runtime's watermark then follows this instead of the newest event
    /// time of any batch, so one fast split does not make another's rows late.
    fn event_time_frontier(&self) -> Option<EventTime> {
        None
    }

    /// The event time this source vouches for while it has nothing to read: a source
    /// whose time is the clock (processing time) says `now`, so windows close on time
    /// without new rows. Most sources say nothing.
    fn idle_frontier(&self) -> Option<EventTime> {
        None
    }

    /// Seeks to a position produced by [`snapshot`](Source::snapshot).
    fn restore(&mut self, _state: OperatorState) -> Result<()> {
        Ok(())
    }

    /// Checkpoint `epoch` is committed: its positions will never be replayed again, so
    /// a source may now commit them to an external system (advisory, e.g. Kafka
    /// consumer offsets). Called between two polls, for the newest committed epoch.
    fn on_checkpoint_complete(&mut self, _epoch: Epoch) -> Result<()> {
        Ok(())
    }
}

/// A range of instants, in nanoseconds since the Unix epoch (UTC), both ends included;
/// `None`: unbounded on that side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeBounds {
    pub from: Option<i64>,
    pub to: Option<i64>,
}

impl TimeBounds {
    /// Whether nothing in `[min, max]` can lie within these bounds.
    pub fn excludes(&self, min: i64, max: i64) -> bool {
        self.from.is_some_and(|from| max < from) || self.to.is_some_and(|to| min > to)
    }

    /// The smallest range holding both.
    pub fn union(self, other: TimeBounds) -> TimeBounds {
        TimeBounds {
            from: self.from.zip(other.from).map(|(a, b)| a.min(b)),
            to: self.to.zip(other.to).map(|(a, b)| a.max(b)),
        }
    }

    /// The range both hold: the tighter bound on each side.
    pub fn intersection(self, other: TimeBounds) -> TimeBounds {
        let tighter = |a: Option<i64>, b: Option<i64>, pick: fn(i64, i64) -> i64| match (a, b) {
            (Some(a), Some(b)) => Some(pick(a, b)),
            (a, None) | (None, a) => a,
        };
        TimeBounds {
            from: tighter(self.from, other.from, i64::max),
            to: tighter(self.to, other.to, i64::min),
        }
    }

    /// Whether it is bounded on some side.
    pub fn is_bounded(&self) -> bool {
        self.from.is_some() || self.to.is_some()
    }
}

/// Builds source subtasks and describes the stream they produce.
pub trait SourceFactory: Send + Sync {
    /// Short description for `explain`, e.g. `nexmark(bid, 10000000 events)`.
    fn describe(&self) -> String;

    /// What the source reads, for the plan's fingerprint (a restore refuses state of
    /// another plan): by default its description. A source whose description counts
    /// what may grow between runs of one plan (files added to a directory) leaves that
    /// count out.
    fn plan_identity(&self) -> String {
        self.describe()
    }

    /// What the source found to read when it was planned, where that may differ from
    /// one planning of the same plan to the next (the files a directory holds): the
    /// workers of one job must have found the same, or they would cut the input into
    /// different splits. `None` (the default) for a source whose input does not depend
    /// on when it is planned.
    fn input_listing(&self) -> Option<String> {
        None
    }

    /// Schema of every batch the source produces.
    fn output_schema(&self) -> &StreamSchema;

    /// Whether a checkpoint taken at one parallelism restores at another: every new
    /// subtask is then given the state of all old subtasks and must work out its part.
    fn can_rescale(&self) -> bool {
        false
    }

    /// Whether every subtask is given every old subtask's state even at the same
    /// parallelism: for a source whose share of the input may move from one subtask to
    /// another between runs (a file added to a directory moves the files after it).
    /// Only a source that can rescale may say so.
    fn restores_from_every_subtask(&self) -> bool {
        false
    }

    /// This source reading only the columns `used` (indices into the output schema;
    /// its event-time column is read regardless): batches keep the output schema, with
    /// the columns not read NULL. `None` (the default) when reading fewer columns saves
    /// nothing. The SQL planner asks once it knows every column a pipeline reads.
    fn reading_only(&self, used: &[usize]) -> Option<Arc<dyn SourceFactory>> {
        let _ = used;
        None
    }

    /// This source allowed to leave out rows whose timestamp column `column` (an index
    /// into the output schema) lies outside `bounds`, where whole parts of its input can
    /// be passed over unread (Parquet row groups, by their statistics). The rows it does
    /// read are not filtered: the pipeline's own filter stays, so this only saves work.
    /// Rows passed over do not advance the watermark. `None` (the default) when the
    /// source cannot pass anything over. The SQL planner asks when every scan of a
    /// table filters such a column to a range.
    fn reading_times_within(
        &self,
        column: usize,
        bounds: TimeBounds,
    ) -> Option<Arc<dyn SourceFactory>> {
        let _ = (column, bounds);
        None
    }

    /// Creates subtask `ctx.subtask` of `ctx.parallelism`; the union of all subtasks'
    /// rows is the source's whole output.
    ///
    /// # Errors
    /// Configuration or input that cannot be opened.
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Source>>;
}

#[cfg(test)]
mod time_bounds_tests {
    use super::TimeBounds;

    #[test]
    fn bounds_exclude_only_ranges_wholly_outside_them() {
        let b = TimeBounds {
            from: Some(10),
            to: Some(20),
        };
        assert!(b.excludes(0, 9));
        assert!(b.excludes(21, 30));
        assert!(!b.excludes(0, 10));
        assert!(!b.excludes(20, 30));
        assert!(!b.excludes(12, 15));
        assert!(!TimeBounds::default().excludes(i64::MIN, i64::MAX));
        let from_only = TimeBounds {
            from: Some(10),
            to: None,
        };
        assert!(from_only.excludes(0, 9) && !from_only.excludes(0, i64::MAX));
    }

    #[test]
    fn a_union_is_unbounded_where_either_is() {
        let a = TimeBounds {
            from: Some(10),
            to: Some(20),
        };
        let b = TimeBounds {
            from: Some(5),
            to: None,
        };
        assert_eq!(
            a.union(b),
            TimeBounds {
                from: Some(5),
                to: None
            }
        );
        assert_eq!(a.union(a), a);
    }

    #[test]
    fn an_intersection_takes_the_tighter_bound_on_each_side() {
        let bounds = |from, to| TimeBounds { from, to };
        assert_eq!(
            bounds(Some(1), Some(9)).intersection(bounds(Some(3), None)),
            bounds(Some(3), Some(9))
        );
        assert_eq!(
            bounds(None, Some(9)).intersection(bounds(None, Some(4))),
            bounds(None, Some(4))
        );
    }
}
