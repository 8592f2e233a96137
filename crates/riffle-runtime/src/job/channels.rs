//! Making the channels a [`Wiring`] describes: each local task's input channels and
//! output routers, and the ends the cluster layer carries to other workers.

use super::wiring::{ChannelEnd, Wiring};
use crate::exchange::OutputRouter;
use crate::placement::RemoteEnds;
use crate::task::InputChannel;
use riffle_core::Message;
use std::collections::HashMap;
use tokio::sync::mpsc::{self, Sender};

/// The made channels, by the local task, (chain, subtask), that uses them.
pub(super) struct Channels {
    /// What each task receives on, in the wiring's order.
    pub(super) inputs_of: HashMap<(usize, usize), Vec<InputChannel>>,
    /// The routers of each task's tail, one per output edge.
    pub(super) routers_of: HashMap<(usize, usize), Vec<OutputRouter>>,
    /// Channels with one end on another worker.
    pub(super) remote: RemoteEnds,
}

/// Makes `wiring`'s channels, each buffering `capacity` messages (backpressure).
pub(super) fn connect(wiring: &Wiring, capacity: usize, max_parallelism: u16) -> Channels {
    let mut made = Channels {
        inputs_of: HashMap::new(),
        routers_of: HashMap::new(),
        remote: RemoteEnds::default(),
    };
    // The sending ends local tasks keep, by channel, until their router takes them.
    let mut senders: Vec<Option<Sender<Message>>> = Vec::with_capacity(wiring.channels.len());
    for channel in &wiring.channels {
        let (tx, rx) = mpsc::channel(capacity);
        let key = channel.key;
        senders.push(match channel.sender {
            ChannelEnd::Local => Some(tx),
            ChannelEnd::Remote { .. } => {
                made.remote.incoming.push((key, tx));
                None
            }
        });
        match channel.receiver {
            ChannelEnd::Local => {
                let input = InputChannel {
                    logical_input: key.input,
                    receiver: rx,
                };
                made.inputs_of
                    .entry((key.chain, key.to))
                    .or_default()
                    .push(input);
            }
            ChannelEnd::Remote { worker } => made.remote.outgoing.push((key, worker, rx)),
        }
    }
    for router in &wiring.routers {
        let router_senders = router
            .channels
            .iter()
            .map(|&i| {
                senders[i]
                    .take()
                    .expect("a local sender belongs to one router")
            })
            .collect();
        made.routers_of
            .entry(router.task)
            .or_default()
            .push(OutputRouter::new(
                router.exchange.clone(),
                router_senders,
                max_parallelism,
            ));
    }
    made
}
