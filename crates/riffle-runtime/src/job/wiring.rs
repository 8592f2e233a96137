//! Planning a job's wiring: which subtasks this process runs and which channels join
//! them, described before any channel exists. Pure: the same plan and placement give the
//! same description, which the tests below check.
//!
//! Every edge into a chain's head gets one channel per (upstream subtask, downstream
//! subtask) pair, only `u == d` for forward edges. Of a job spread over workers, this
//! process makes the channels with at least one local end; the cluster layer carries the
//! other end over the network (docs/cluster.md).

use crate::exchange::Exchange;
use crate::graph::Node;
use crate::placement::{ChannelKey, Placement};
use crate::plan::PhysicalPlan;

/// What wiring needs to know of one chain.
#[derive(Debug, Clone)]
pub(super) struct ChainEdges {
    /// Subtasks of the chain.
    pub(super) parallelism: usize,
    /// Whether the chain runs whole on worker 0: its sink commits only in the process
    /// that staged (Kafka).
    pub(super) pinned: bool,
    /// The edges into its head, by logical input: the upstream chain and the exchange.
    pub(super) inputs: Vec<(usize, Exchange)>,
}

/// Where one end of a channel is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ChannelEnd {
    /// A task of this process.
    Local,
    /// A task of another worker process.
    Remote { worker: usize },
}

/// One channel this process makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PlannedChannel {
    pub(super) key: ChannelKey,
    pub(super) sender: ChannelEnd,
    pub(super) receiver: ChannelEnd,
}

/// One output edge of a local task and the channels it sends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PlannedRouter {
    /// The sending task: (chain, subtask).
    pub(super) task: (usize, usize),
    pub(super) exchange: Exchange,
    /// Indices into [`Wiring::channels`], in downstream subtask order (a keyed or
    /// round-robin router addresses subtask `d` by its position).
    pub(super) channels: Vec<usize>,
}

/// The tasks and channels of this process, in the order they are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Wiring {
    /// The tasks this process runs, as (chain, subtask): chain by chain, in subtask
    /// order (a task's index in this list names it in errors).
    pub(super) tasks: Vec<(usize, usize)>,
    /// Every channel with at least one local end.
    pub(super) channels: Vec<PlannedChannel>,
    /// The routers of local tasks; a task with several output edges has one per edge,
    /// in the order of the chains they feed.
    pub(super) routers: Vec<PlannedRouter>,
}

/// What wiring needs of the compiled plan, chain by chain.
pub(super) fn chain_edges(plan: &PhysicalPlan, nodes: &[Node]) -> Vec<ChainEdges> {
    plan.chains
        .iter()
        .map(|chain| ChainEdges {
            parallelism: chain.parallelism,
            pinned: chain.nodes.iter().any(|id| nodes[id.0].runs_on_worker_0()),
            inputs: nodes[chain.nodes[0].0]
                .inputs
                .iter()
                .map(|edge| (plan.chain_of[edge.from.0], edge.exchange.clone()))
                .collect(),
        })
        .collect()
}

/// The tasks and channels `placement`'s process makes for `chains`.
pub(super) fn plan_wiring(chains: &[ChainEdges], placement: Placement) -> Wiring {
    let end = |chain: usize, subtask: usize| {
        let pinned = chains[chain].pinned;
        if placement.is_local(subtask, pinned) {
            ChannelEnd::Local
        } else {
            ChannelEnd::Remote {
                worker: placement.worker_of(subtask, pinned),
            }
        }
    };
    let mut wiring = Wiring {
        tasks: Vec::new(),
        channels: Vec::new(),
        routers: Vec::new(),
    };
    for (c, chain) in chains.iter().enumerate() {
        for (logical_input, (up_chain, exchange)) in chain.inputs.iter().enumerate() {
            let up_chain = *up_chain;
            let mut sent_by_upstream = vec![Vec::new(); chains[up_chain].parallelism];
            for d in 0..chain.parallelism {
                for (u, sent) in sent_by_upstream.iter_mut().enumerate() {
                    if *exchange == Exchange::Forward && u != d {
                        continue;
                    }
                    let (sender, receiver) = (end(up_chain, u), end(c, d));
                    if sender != ChannelEnd::Local && receiver != ChannelEnd::Local {
                        continue;
                    }
                    if sender == ChannelEnd::Local {
                        sent.push(wiring.channels.len());
                    }
                    let key = ChannelKey {
                        chain: c,
                        input: logical_input,
                        from: u,
                        to: d,
                    };
                    wiring.channels.push(PlannedChannel {
                        key,
                        sender,
                        receiver,
                    });
                }
            }
            for (u, sent) in sent_by_upstream.into_iter().enumerate() {
                if end(up_chain, u) == ChannelEnd::Local {
                    wiring.routers.push(PlannedRouter {
                        task: (up_chain, u),
                        exchange: exchange.clone(),
                        channels: sent,
                    });
                }
            }
        }
    }
    for (c, chain) in chains.iter().enumerate() {
        let local = (0..chain.parallelism).filter(|&s| end(c, s) == ChannelEnd::Local);
        wiring.tasks.extend(local.map(|s| (c, s)));
    }
    wiring
}

#[cfg(test)]
mod tests {
    use super::*;
    use ChannelEnd::{Local, Remote};

    fn chain(parallelism: usize, inputs: Vec<(usize, Exchange)>) -> ChainEdges {
        ChainEdges {
            parallelism,
            pinned: false,
            inputs,
        }
    }

    fn keys(wiring: &Wiring) -> Vec<(usize, usize, usize, usize)> {
        let key = |c: &PlannedChannel| (c.key.chain, c.key.input, c.key.from, c.key.to);
        wiring.channels.iter().map(key).collect()
    }

    #[test]
    fn a_forward_edge_joins_subtasks_of_equal_index_only() {
        let chains = [chain(3, vec![]), chain(3, vec![(0, Exchange::Forward)])];
        let wiring = plan_wiring(&chains, Placement::single());
        assert_eq!(
            keys(&wiring),
            vec![(1, 0, 0, 0), (1, 0, 1, 1), (1, 0, 2, 2)]
        );
        let routers: Vec<_> = wiring
            .routers
            .iter()
            .map(|r| (r.task, r.channels.clone()))
            .collect();
        assert_eq!(
            routers,
            vec![((0, 0), vec![0]), ((0, 1), vec![1]), ((0, 2), vec![2])]
        );
    }

    #[test]
    fn a_keyed_edge_joins_every_pair_and_each_router_lists_downstream_subtasks_in_order() {
        let chains = [
            chain(2, vec![]),
            chain(3, vec![(0, Exchange::Keyed(vec![0]))]),
        ];
        let wiring = plan_wiring(&chains, Placement::single());
        assert_eq!(wiring.channels.len(), 6);
        for router in &wiring.routers {
            let to: Vec<usize> = router
                .channels
                .iter()
                .map(|&i| wiring.channels[i].key.to)
                .collect();
            assert_eq!(to, vec![0, 1, 2]);
            assert!(router
                .channels
                .iter()
                .all(|&i| wiring.channels[i].key.from == router.task.1));
            assert_eq!(router.exchange, Exchange::Keyed(vec![0]));
        }
        assert_eq!(wiring.routers.len(), 2);
    }

    #[test]
    fn a_single_process_runs_every_subtask_chain_by_chain() {
        let chains = [chain(2, vec![]), chain(3, vec![(0, Exchange::RoundRobin)])];
        let wiring = plan_wiring(&chains, Placement::single());
        assert_eq!(wiring.tasks, vec![(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]);
        assert!(wiring
            .channels
            .iter()
            .all(|c| c.sender == Local && c.receiver == Local));
    }

    #[test]
    fn a_worker_makes_only_channels_with_a_local_end_and_names_the_remote_worker() {
        let chains = [chain(2, vec![]), chain(2, vec![(0, Exchange::RoundRobin)])];
        let second = Placement {
            workers: 2,
            worker: 1,
        };
        let wiring = plan_wiring(&chains, second);
        assert_eq!(wiring.tasks, vec![(0, 1), (1, 1)]);
        let ends: Vec<_> = wiring
            .channels
            .iter()
            .map(|c| ((c.key.from, c.key.to), c.sender, c.receiver))
            .collect();
        assert_eq!(
            ends,
            vec![
                ((1, 0), Local, Remote { worker: 0 }),
                ((0, 1), Remote { worker: 0 }, Local),
                ((1, 1), Local, Local),
            ]
        );
        // Only the local upstream subtask routes, to both downstream subtasks.
        assert_eq!(wiring.routers.len(), 1);
        assert_eq!(wiring.routers[0].task, (0, 1));
        assert_eq!(wiring.routers[0].channels, vec![0, 2]);
    }

    #[test]
    fn a_pinned_chain_runs_and_receives_on_worker_0() {
        let mut sink = chain(2, vec![(0, Exchange::Forward)]);
        sink.pinned = true;
        let chains = [chain(2, vec![]), sink];
        let second = Placement {
            workers: 2,
            worker: 1,
        };
        let wiring = plan_wiring(&chains, second);
        assert_eq!(wiring.tasks, vec![(0, 1)]);
        assert_eq!(
            wiring.channels,
            vec![PlannedChannel {
                key: ChannelKey {
                    chain: 1,
                    input: 0,
                    from: 1,
                    to: 1
                },
                sender: Local,
                receiver: Remote { worker: 0 },
            }]
        );
    }
}
