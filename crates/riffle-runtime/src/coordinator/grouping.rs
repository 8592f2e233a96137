//! Which sink output a completing epoch publishes, and which it holds back for a later
//! epoch: a sink whose commits cover several epochs (`SinkFactory::epochs_per_commit`,
//! an Iceberg table's `'epochs-per-commit'`) publishes once the epochs it holds span
//! that many. Pure; the coordinator records the held output in the epoch's manifest,
//! where recovery finds and publishes it (docs/engine.md, "Exactly-once output").
//!
//! Rules:
//! - A sink covering one epoch per commit publishes every epoch's output.
//! - Otherwise its output is held until the span from its oldest held epoch to the
//!   completing one reaches the count. Spans count epoch numbers, not epochs with
//!   output, so a sink that stages nothing for a while still publishes on time, and an
//!   epoch that failed (its output carried into the next) counts as one.
//! - An epoch that ends the input or takes a savepoint publishes everything: nothing
//!   stays held past the job's end, and a savepoint's state has all its output out.

use riffle_core::{committables_by_sink, BarrierKind, Committable, Epoch};

/// An epoch's sink output, split.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Publication {
    /// Published by this epoch's commit: held output of earlier epochs first.
    pub publish: Vec<Committable>,
    /// Held for a later epoch (recorded in this epoch's manifest).
    pub hold: Vec<Committable>,
}

/// Splits the output held so far (`held`) and the completing epoch's (`staged`: its
/// acks' and what failed epochs carried into it) into what epoch `epoch` of `kind`
/// publishes and what it holds; `epochs_per_commit` answers per sink id.
pub fn split_publication(
    held: &[Committable],
    staged: &[Committable],
    epoch: Epoch,
    kind: BarrierKind,
    epochs_per_commit: impl Fn(&str) -> u64,
) -> Publication {
    let output: Vec<Committable> = held.iter().chain(staged).cloned().collect();
    let mut publication = Publication::default();
    for (sink, group) in committables_by_sink(&output) {
        let oldest = group.iter().map(|c| c.epoch.0).min().unwrap_or(epoch.0);
        let span = epoch.0.saturating_sub(oldest) + 1;
        let publishes = kind != BarrierKind::Checkpoint || span >= epochs_per_commit(sink);
        let into = if publishes {
            &mut publication.publish
        } else {
            &mut publication.hold
        };
        into.extend(group.into_iter().cloned());
    }
    publication
}

#[cfg(test)]
mod tests {
    use super::*;

    fn staged(sink: &str, epoch: u64, subtask: usize) -> Committable {
        Committable {
            sink: sink.into(),
            subtask,
            epoch: Epoch(epoch),
            payload: format!("{sink}-{epoch}-{subtask}"),
        }
    }

    fn every(n: u64) -> impl Fn(&str) -> u64 {
        move |sink: &str| if sink == "lake" { n } else { 1 }
    }

    /// Runs epochs `first..=last` as checkpoints, each staging one committable of
    /// `lake`; returns which epochs each publication held.
    fn publications(n: u64, first: u64, last: u64) -> Vec<Vec<u64>> {
        let mut held = Vec::new();
        let mut published = Vec::new();
        for epoch in first..=last {
            let p = split_publication(
                &held,
                &[staged("lake", epoch, 0)],
                Epoch(epoch),
                BarrierKind::Checkpoint,
                every(n),
            );
            if !p.publish.is_empty() {
                published.push(p.publish.iter().map(|c| c.epoch.0).collect());
            }
            held = p.hold;
        }
        published
    }

    #[test]
    fn a_sink_of_one_epoch_per_commit_publishes_every_epoch() {
        assert_eq!(publications(1, 4, 6), [vec![4], vec![5], vec![6]]);
    }

    #[test]
    fn a_sink_of_n_epochs_per_commit_publishes_every_nth_epoch_with_the_held_ones() {
        assert_eq!(publications(3, 1, 7), [vec![1, 2, 3], vec![4, 5, 6]]);
    }

    #[test]
    fn other_sinks_publish_every_epoch_while_one_holds() {
        let p = split_publication(
            &[],
            &[
                staged("lake", 1, 0),
                staged("files", 1, 0),
                staged("lake", 1, 1),
            ],
            Epoch(1),
            BarrierKind::Checkpoint,
            every(2),
        );
        assert_eq!(p.publish, [staged("files", 1, 0)]);
        assert_eq!(p.hold, [staged("lake", 1, 0), staged("lake", 1, 1)]);
    }

    #[test]
    fn the_span_counts_epoch_numbers_so_quiet_and_failed_epochs_count() {
        // Epoch 5 held; 6 failed (its output carried into 7); 7 completes: 5..=7 is 3.
        let p = split_publication(
            &[staged("lake", 5, 0)],
            &[staged("lake", 6, 0), staged("lake", 7, 0)],
            Epoch(7),
            BarrierKind::Checkpoint,
            every(3),
        );
        assert!(p.hold.is_empty());
        assert_eq!(
            p.publish,
            [
                staged("lake", 5, 0),
                staged("lake", 6, 0),
                staged("lake", 7, 0)
            ]
        );
        // Held epoch 2, epochs 3 and 4 staged nothing for the sink: epoch 4 publishes 2.
        let p = split_publication(
            &[staged("lake", 2, 0)],
            &[],
            Epoch(4),
            BarrierKind::Checkpoint,
            every(3),
        );
        assert_eq!(p.publish, [staged("lake", 2, 0)]);
    }

    #[test]
    fn the_end_of_input_and_savepoints_publish_everything_held() {
        for kind in [
            BarrierKind::EndOfInput,
            BarrierKind::Savepoint,
            BarrierKind::StopWithSavepoint { drain: false },
        ] {
            let p = split_publication(
                &[staged("lake", 8, 0)],
                &[staged("lake", 9, 0)],
                Epoch(9),
                kind,
                every(10),
            );
            assert!(p.hold.is_empty(), "{kind:?}");
            assert_eq!(p.publish.len(), 2, "{kind:?}");
        }
    }
}
