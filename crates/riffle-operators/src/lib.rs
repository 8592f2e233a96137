//! riffle-operators: the transformations a pipeline is built from.
//!
//! ```text
//!   rows ─▶ Filter / Project (DataFusion physical expressions, stateless, chainable)
//!        ─▶ WindowAggregate (tumbling | hopping, keyed, fired by watermark)
//!        ─▶ SessionAggregate (gap-based sessions per key)
//!        ─▶ WindowExpand (a row per hopping / cumulating window holding it)
//!        ─▶ WindowJoin (equi-join of two streams inside one window)
//!        ─▶ WindowMaxRows (rows carrying a window's maximum: the q5/q7 pattern)
//!        ─▶ UpdatingAggregate (unbounded GROUP BY emitting updated rows, or a changelog)
//!        ─▶ RetractingAggregate (GROUP BY over a changelog: rows added and taken back)
//!        ─▶ StreamJoin (unbounded equi-join) / IntervalMaxJoin (max over a validity interval)
//! ```
//!
//! Each operator lives in one file with its factory (planning-time checks and output
//! schema), its runtime state, and its snapshot/restore as key-grouped Arrow batches.

pub mod aggregate;
pub mod changelog_join;
mod delta_log;
pub mod expr;
pub mod filter;
mod gather;
pub mod interval_max_join;
mod keyed_changelog;
pub mod lookup_join;
pub mod over;
pub mod project;
pub mod retracting_aggregate;
pub mod session_aggregate;
pub mod spill;
pub mod stream_join;
pub mod top_n;
pub mod union;
pub mod updating_aggregate;
pub mod upsert_materialize;
pub mod upsert_normalize;
pub mod window;
pub mod window_aggregate;
pub mod window_expand;
pub mod window_join;
pub mod window_max_rows;
mod window_top_n;

pub use aggregate::{AggregateFunction, AggregateSpec};
pub use changelog_join::ChangelogJoinFactory;
pub use filter::FilterFactory;
pub use interval_max_join::IntervalMaxJoinFactory;
pub use lookup_join::{LookupJoinFactory, LookupJoinKind};
pub use over::{OverAggregate, OverAggregateFactory, OverFrame, OverFunction, OverInput};
pub use project::ProjectFactory;
pub use retracting_aggregate::RetractingAggregateFactory;
pub use session_aggregate::SessionAggregateFactory;
pub use stream_join::{IntervalCondition, StreamJoinFactory, TimeBound};
pub use top_n::{OrderColumn, TopNFactory};
pub use union::UnionFactory;
pub use updating_aggregate::UpdatingAggregateFactory;
pub use upsert_materialize::UpsertMaterializeFactory;
pub use upsert_normalize::UpsertNormalizeFactory;
pub use window::WindowSpec;
pub use window_aggregate::WindowAggregateFactory;
pub use window_expand::{WindowBound, WindowExpandFactory};
pub use window_join::{JoinKind, WindowJoinFactory};
pub use window_max_rows::{Extreme, WindowMaxRowsFactory};
