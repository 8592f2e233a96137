//! Which worker process runs which subtask, when one job runs on several (docs/cluster.md).
//!
//! Every worker plans the same job from the same file and computes the same placement,
//! so no placement service is needed: subtask `s` of every chain runs on worker
//! `s % workers`. Forward edges join subtasks of equal index, so they never leave a
//! worker; keyed, broadcast and round-robin edges cross workers where their ends differ.
//! A chain whose sink must commit in the process that staged its output (a Kafka
//! producer's transaction) is pinned: all its subtasks run on worker 0, next to the
//! coordinator that commits them.

use riffle_core::Message;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::{Receiver, Sender};

/// The ends of channels whose other end is on another worker; the cluster layer carries
/// their messages over the network, in order (docs/cluster.md).
#[derive(Default)]
pub struct RemoteEnds {
    /// Channels a local task sends on and a task of worker `.1` receives: drain and ship.
    pub outgoing: Vec<(ChannelKey, usize, Receiver<Message>)>,
    /// Channels a local task receives on and a remote task sends on: feed them from the
    /// network; dropping one without [`Message::End`] fails the receiving task.
    pub incoming: Vec<(ChannelKey, Sender<Message>)>,
}

/// The workers of a job and which one this process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// How many worker processes run the job (1: a single process).
    pub workers: usize,
    /// This process's index, `0..workers`. Worker 0 runs the checkpoint coordinator.
    pub worker: usize,
}

impl Default for Placement {
    fn default() -> Self {
        Self::single()
    }
}

impl Placement {
    /// The whole job in this process.
    pub fn single() -> Self {
        Self {
            workers: 1,
            worker: 0,
        }
    }

    /// The worker that runs `subtask` of a chain, `pinned` to worker 0 or not.
    pub fn worker_of(&self, subtask: usize, pinned: bool) -> usize {
        if pinned {
            0
        } else {
            subtask % self.workers.max(1)
        }
    }

    /// Whether this process runs `subtask` of a chain, `pinned` to worker 0 or not.
    pub fn is_local(&self, subtask: usize, pinned: bool) -> bool {
        self.worker_of(subtask, pinned) == self.worker
    }

    /// Whether the job is spread over more than one process.
    pub fn is_distributed(&self) -> bool {
        self.workers > 1
    }
}

/// One channel of the job: the edge into a chain's head, and the subtasks at its ends.
/// Both workers of a remote channel name it the same way, so a stream is matched to
/// the task it feeds by this key alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ChannelKey {
    /// The receiving chain (its index in the physical plan).
    pub chain: usize,
    /// Which input edge of the chain's head.
    pub input: usize,
    /// The sending subtask.
    pub from: usize,
    /// The receiving subtask.
    pub to: usize,
}

impl std::fmt::Display for ChannelKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "channel {}→{} into task {} (input {})",
            self.from, self.to, self.chain, self.input
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtasks_are_dealt_to_workers_in_turn() {
        let p = Placement {
            workers: 3,
            worker: 1,
        };
        let local: Vec<usize> = (0..7).filter(|&s| p.is_local(s, false)).collect();
        assert_eq!(local, vec![1, 4]);
        assert_eq!(p.worker_of(5, false), 2);
        assert!(p.is_distributed());
    }

    #[test]
    fn a_pinned_chain_runs_whole_on_worker_0() {
        let first = Placement {
            workers: 3,
            worker: 0,
        };
        assert!((0..5).all(|s| first.is_local(s, true) && first.worker_of(s, true) == 0));
        let other = Placement {
            workers: 3,
            worker: 2,
        };
        assert!((0..5).all(|s| !other.is_local(s, true)));
    }

    #[test]
    fn a_single_process_runs_every_subtask() {
        let p = Placement::single();
        assert!((0..9).all(|s| p.is_local(s, false) && p.is_local(s, true)));
        assert!(!p.is_distributed());
    }
}
