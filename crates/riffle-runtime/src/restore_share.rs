//! Which old subtasks' state a process of a job on several workers reads at restore
//! (docs/cluster.md, "State per worker"): its own subtasks' at the same
//! parallelism; after a rescale, the old subtasks whose key groups its subtasks now
//! own (every old subtask's for an operator that is not keyed, whose rows may lie in
//! any); every old subtask's for sources, whose positions are small and which work out
//! their part from all of them. The others' files stay unread, so bytes read per
//! worker are about the total over the number of workers.

use crate::graph::{JobGraph, NodeKind};
use crate::placement::Placement;
use crate::plan::PhysicalPlan;
use riffle_core::{KeyGroup, OperatorFactory};
use riffle_state::Manifest;
use std::collections::{BTreeSet, HashMap};

/// The old subtasks to read, per operator id; an operator absent here is read whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreShare {
    old_subtasks: HashMap<String, BTreeSet<usize>>,
}

impl RestoreShare {
    /// What `placement`'s process reads of `manifest` to run `graph`.
    pub fn of(graph: &JobGraph, placement: Placement, manifest: &Manifest) -> Self {
        let nodes = graph.nodes();
        let plan = PhysicalPlan::compile(graph);
        let pinned: Vec<bool> = plan
            .chains
            .iter()
            .map(|c| c.nodes.iter().any(|id| nodes[id.0].runs_on_worker_0()))
            .collect();
        let mut old_subtasks = HashMap::new();
        for entry in &manifest.operators {
            let Some(at) = nodes.iter().position(|n| n.id.0 == entry.operator) else {
                // Not in the plan any more: nothing of it is restored.
                old_subtasks.insert(entry.operator.clone(), BTreeSet::new());
                continue;
            };
            let node = &nodes[at];
            if matches!(node.kind, NodeKind::Source { .. }) {
                continue;
            }
            let local: Vec<usize> = (0..node.parallelism)
                .filter(|t| placement.is_local(*t, pinned[plan.chain_of[at]]))
                .collect();
            let keyed = match &node.kind {
                NodeKind::Operator(factory) => keyed(factory.as_ref()),
                _ => false,
            };
            let needed = old_subtasks_needed(
                keyed,
                &local,
                node.parallelism,
                entry.parallelism,
                entry.max_parallelism,
            );
            old_subtasks.insert(entry.operator.clone(), needed);
        }
        Self { old_subtasks }
    }

    /// Whether `operator`'s old subtask `old` is read.
    pub fn reads(&self, operator: &str, old: usize) -> bool {
        self.old_subtasks
            .get(operator)
            .is_none_or(|needed| needed.contains(&old))
    }

    /// The old subtasks of `operator` (checkpointed at `old_parallelism`) read.
    pub fn read_of(&self, operator: &str, old_parallelism: usize) -> BTreeSet<usize> {
        (0..old_parallelism)
            .filter(|s| self.reads(operator, *s))
            .collect()
    }
}

/// The state file bytes of `manifest` that `share` reads (all without one), and the
/// manifest's total.
pub fn state_bytes(manifest: &Manifest, share: Option<&RestoreShare>) -> (u64, u64) {
    let mut bytes = (0, 0);
    for op in &manifest.operators {
        for s in &op.subtasks {
            let size: u64 = s.files.iter().map(|f| f.bytes).sum();
            bytes.1 += size;
            if share.is_none_or(|share| share.reads(&op.operator, s.subtask)) {
                bytes.0 += size;
            }
        }
    }
    bytes
}

/// Whether every input of `factory` is partitioned by key (global operators, keyed by
/// no column, included): then each row of its state carries a key group that its
/// subtask owned. A stage that is not (a local pre-stage, chained to its source) may
/// write rows in key groups it does not own: the local max-rows stage writes all of
/// its rows in key group 0.
pub fn keyed(factory: &dyn OperatorFactory) -> bool {
    (0..factory.input_count()).all(|i| factory.key_columns(i).is_some())
}

/// The old subtasks whose state `subtasks` of `parallelism` restore: for a
/// [`keyed`] operator [`old_subtasks_for`]; for one that is not, after a rescale every
/// old subtask (its rows of any key group may lie in any of them).
pub fn old_subtasks_needed(
    keyed: bool,
    subtasks: &[usize],
    parallelism: usize,
    old_parallelism: usize,
    max_parallelism: u16,
) -> BTreeSet<usize> {
    if !keyed && parallelism != old_parallelism {
        return (0..old_parallelism).collect();
    }
    old_subtasks_for(subtasks, parallelism, old_parallelism, max_parallelism)
}

/// The old subtasks (of `old_parallelism`) holding state that `subtasks` of
/// `parallelism` restore: the same ones at the same parallelism, else those whose key
/// groups the new subtasks own.
pub fn old_subtasks_for(
    subtasks: &[usize],
    parallelism: usize,
    old_parallelism: usize,
    max_parallelism: u16,
) -> BTreeSet<usize> {
    if parallelism == old_parallelism {
        return subtasks.iter().copied().collect();
    }
    let mine: BTreeSet<usize> = subtasks.iter().copied().collect();
    (0..max_parallelism)
        .map(KeyGroup)
        .filter(|g| mine.contains(&g.subtask(parallelism, max_parallelism)))
        .map(|g| g.subtask(old_parallelism, max_parallelism))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_same_parallelism_a_worker_reads_its_own_subtasks() {
        assert_eq!(old_subtasks_for(&[1, 4], 6, 6, 128), BTreeSet::from([1, 4]));
    }

    #[test]
    fn after_a_rescale_a_worker_reads_the_old_subtasks_of_its_key_groups() {
        // p4 → p2: new subtask 0 owns key groups 0..64, old subtasks 0 and 1's.
        assert_eq!(old_subtasks_for(&[0], 2, 4, 128), BTreeSet::from([0, 1]));
        assert_eq!(old_subtasks_for(&[1], 2, 4, 128), BTreeSet::from([2, 3]));
        // p2 → p3: new subtask 1 owns key groups 43..86, which spanned both.
        assert_eq!(old_subtasks_for(&[1], 3, 2, 128), BTreeSet::from([0, 1]));
        assert_eq!(old_subtasks_for(&[0], 3, 2, 128), BTreeSet::from([0]));
    }

    #[test]
    fn after_a_rescale_an_operator_that_is_not_keyed_reads_every_old_subtask() {
        // The local max-rows stage writes all its rows in key group 0 in every subtask:
        // the new owner of key group 0 needs them all.
        assert_eq!(
            old_subtasks_needed(false, &[0], 4, 2, 128),
            BTreeSet::from([0, 1])
        );
        assert_eq!(
            old_subtasks_needed(false, &[0], 1, 3, 128),
            BTreeSet::from([0, 1, 2])
        );
        // At the same parallelism it restores its own, as a keyed one does.
        assert_eq!(
            old_subtasks_needed(false, &[1], 2, 2, 128),
            BTreeSet::from([1])
        );
        assert_eq!(
            old_subtasks_needed(true, &[0], 4, 2, 128),
            old_subtasks_for(&[0], 4, 2, 128)
        );
    }

    #[test]
    fn every_key_group_is_read_by_some_worker() {
        for (old, new, workers) in [(4, 2, 2), (3, 5, 3), (8, 3, 2), (5, 5, 4)] {
            let mut read = BTreeSet::new();
            for worker in 0..workers {
                let local: Vec<usize> = (0..new).filter(|t| t % workers == worker).collect();
                read.extend(old_subtasks_for(&local, new, old, 128));
            }
            assert_eq!(read, (0..old).collect(), "p{old} → p{new} on {workers}");
        }
    }
}
