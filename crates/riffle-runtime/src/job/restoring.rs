//! Restoring: handing each subtask of a job its state, watermark and counter totals
//! from the checkpoint the job starts from (docs/engine.md, "Barriers and alignment").

use crate::error::{RuntimeError, RuntimeResult};
use crate::graph::{Node, NodeKind};
use crate::plan::ChainSpec;
use crate::restore::{RestoredJob, RestoredWatermark, StateOwner};
use crate::restored_state::RestoredState;
use riffle_core::{CounterValues, EventTime, OperatorId};

/// Refuses a checkpoint holding state for operators the job no longer has: their state
/// would be silently lost.
///
/// # Errors
/// [`RuntimeError::Restore`] naming the orphaned operators.
pub(super) fn refuse_orphans(restore: Option<&RestoredJob>, nodes: &[Node]) -> RuntimeResult<()> {
    let Some(restore) = restore else {
        return Ok(());
    };
    let mut orphans: Vec<&str> = restore
        .operators
        .keys()
        .filter(|id| !nodes.iter().any(|n| &n.id == *id))
        .map(|id| id.0.as_str())
        .collect();
    if orphans.is_empty() {
        return Ok(());
    }
    orphans.sort_unstable();
    Err(RuntimeError::Restore {
        operator: OperatorId(orphans.join(", ")),
        message: "the checkpoint holds state for these operators, which the job no longer has"
            .into(),
    })
}

/// The checkpointed state of one subtask, if the job restores.
pub(super) fn restored_state(
    restore: Option<&RestoredJob>,
    id: &OperatorId,
    subtask: usize,
    parallelism: usize,
    max_parallelism: u16,
    owner: StateOwner,
) -> RuntimeResult<Option<RestoredState>> {
    let Some(restore) = restore else {
        return Ok(None);
    };
    restore
        .state_for(id, subtask, parallelism, max_parallelism, owner)
        .map_err(|message| RuntimeError::Restore {
            operator: id.clone(),
            message,
        })
}

/// The counter totals a subtask continues from: a resumed run continues the
/// checkpoint's totals, kept on subtask 0.
pub(super) fn resumed_counters(
    restore: Option<&RestoredJob>,
    id: &OperatorId,
    subtask: usize,
) -> Option<CounterValues> {
    let restored = restore.filter(|_| subtask == 0)?;
    restored.counters.get(id).copied()
}

/// The watermark a restored chain subtask resumes at: the smallest over its nodes that
/// the checkpoint holds.
pub(super) fn restored_watermark(
    restore: Option<&RestoredJob>,
    chain: &ChainSpec,
    nodes: &[Node],
    subtask: usize,
) -> Option<EventTime> {
    let restore = restore?;
    lowest_restored(chain.nodes.iter().map(|id| {
        let node = &nodes[id.0];
        let from_every_subtask = match &node.kind {
            NodeKind::Source { factory, .. } => factory.restores_from_every_subtask(),
            _ => false,
        };
        restore.watermark_for(&node.id, subtask, chain.parallelism, from_every_subtask)
    }))
}

/// The lowest of a chain's restored watermarks: an unknown one is lower than any, and
/// nodes the checkpoint does not hold do not count.
fn lowest_restored(watermarks: impl Iterator<Item = RestoredWatermark>) -> Option<EventTime> {
    let mut lowest = None;
    for w in watermarks {
        match w {
            RestoredWatermark::NotHeld => {}
            RestoredWatermark::Unknown => return None,
            RestoredWatermark::At(t) => lowest = Some(lowest.map_or(t, |l: EventTime| l.min(t))),
        }
    }
    lowest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_resumes_at_its_lowest_restored_watermark_and_unknown_is_lowest() {
        use RestoredWatermark::{At, NotHeld, Unknown};
        assert_eq!(
            lowest_restored([At(7), NotHeld, At(3)].into_iter()),
            Some(3)
        );
        assert_eq!(lowest_restored([At(7), Unknown, At(3)].into_iter()), None);
        assert_eq!(lowest_restored([NotHeld].into_iter()), None);
    }
}
