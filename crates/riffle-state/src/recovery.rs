//! Checkpoint decisions as pure functions: which epoch to restore, what GC may delete,
//! whether a generation may commit. No storage calls here; the store gathers the facts.

use crate::manifest::{Manifest, ManifestStatus};
use riffle_core::{Committable, Epoch, OutputOwner, StagedOutput};
use std::collections::{BTreeMap, BTreeSet};

/// What the store found for one epoch directory.
// Findings are few (one per epoch or label) and short-lived: boxing buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum EpochFinding {
    /// A manifest whose files all verified.
    Valid(Manifest),
    /// A manifest or file is damaged; the reason names the file.
    Damaged(String),
    /// No manifest: an epoch that never reached its commit point.
    Partial,
}

/// The outcome of recovery planning.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveryPlan {
    /// The epoch to restore, or `None` to start empty (no usable checkpoint).
    pub restore: Option<Epoch>,
    /// The chosen manifest was PREPARED: its sink commits must be re-run (roll forward).
    pub roll_forward: bool,
    /// Damaged epochs newer than the choice, with the reason, newest first.
    pub skipped: Vec<(Epoch, String)>,
    /// Epochs without a manifest, to sweep.
    pub partial: Vec<Epoch>,
}

/// Chooses the newest valid checkpoint (PREPARED counts: its commit was decided).
pub fn plan_recovery(findings: &[(Epoch, EpochFinding)]) -> RecoveryPlan {
    let mut sorted: Vec<&(Epoch, EpochFinding)> = findings.iter().collect();
    sorted.sort_by_key(|f| std::cmp::Reverse(f.0));
    let mut plan = RecoveryPlan {
        restore: None,
        roll_forward: false,
        skipped: Vec::new(),
        partial: Vec::new(),
    };
    for (epoch, finding) in sorted {
        match finding {
            EpochFinding::Partial => plan.partial.push(*epoch),
            EpochFinding::Damaged(reason) if plan.restore.is_none() => {
                plan.skipped.push((*epoch, reason.clone()))
            }
            EpochFinding::Damaged(_) => {}
            EpochFinding::Valid(m) if plan.restore.is_none() => {
                plan.restore = Some(*epoch);
                plan.roll_forward = m.status == ManifestStatus::Prepared;
            }
            EpochFinding::Valid(_) => {}
        }
    }
    plan.partial.sort();
    plan
}

/// Epochs GC may delete: committed epochs beyond the newest `retain`, and partial or
/// damaged epochs older than the newest retained one. Epochs newer than the newest
/// committed one (possibly in flight) and every retained epoch are kept.
pub fn plan_gc(findings: &[(Epoch, EpochFinding)], retain: usize) -> Vec<Epoch> {
    let mut committed: Vec<Epoch> = findings
        .iter()
        .filter_map(|(e, f)| match f {
            EpochFinding::Valid(m) if m.status == ManifestStatus::Committed => Some(*e),
            _ => None,
        })
        .collect();
    committed.sort_by_key(|e| std::cmp::Reverse(*e));
    let kept: BTreeSet<Epoch> = committed.iter().take(retain.max(1)).copied().collect();
    let Some(&oldest_kept) = kept.iter().next() else {
        return Vec::new();
    };
    let mut delete: Vec<Epoch> = findings
        .iter()
        .map(|(e, _)| *e)
        .filter(|e| !kept.contains(e) && *e < oldest_kept)
        .collect();
    delete.sort();
    delete
}

/// Files that valid manifests reference, except those of the epochs in `deleting`: what
/// deleting those epochs must keep (incremental checkpoints share files across epochs).
pub fn referenced_files(
    findings: &[(Epoch, EpochFinding)],
    deleting: &[Epoch],
) -> std::collections::HashSet<String> {
    findings
        .iter()
        .filter(|(e, _)| !deleting.contains(e))
        .filter_map(|(_, f)| match f {
            EpochFinding::Valid(m) => Some(m.file_paths()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// How many of the `keep` files lie in `epoch`'s directory: a directory that holds any
/// stays when the epoch is deleted.
pub fn kept_in_epoch(keep: &std::collections::HashSet<String>, epoch: Epoch) -> usize {
    let prefix = format!("checkpoints/{}/", crate::layout::epoch_dir_name(epoch));
    keep.iter().filter(|k| k.starts_with(&prefix)).count()
}

/// What recovery does with the PREPARED epoch it would restore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreparedEpoch {
    /// Every committable is published or staged: commit the staged ones.
    RollForward,
    /// Some output is lost and none is published: nothing of the epoch is visible, so
    /// it is replayed from the checkpoint before it (its staged rest is discarded).
    Replay,
    /// Some output is lost and some is published: neither rolling forward nor replaying
    /// is exact, so recovery refuses to start.
    Refuse,
}

/// Decides [`PreparedEpoch`] from where each of the epoch's committables stands.
pub fn decide_prepared(outputs: &[StagedOutput]) -> PreparedEpoch {
    let lost = outputs.contains(&StagedOutput::Lost);
    let published = outputs.contains(&StagedOutput::Published);
    match (lost, published) {
        (false, _) => PreparedEpoch::RollForward,
        (true, false) => PreparedEpoch::Replay,
        (true, true) => PreparedEpoch::Refuse,
    }
}

/// The committables that committed checkpoints from `since` (where the restored
/// state's history starts) up to and including `restored` record as published: the
/// output every sink must still hold before recovery deletes, takes back or skips
/// anything (docs/engine.md, "Output a sink lost"). A PREPARED manifest's committables
/// are not among them (they may never have been published), nor the held ones
/// (published only by a later epoch), nor those of epochs before `since` (a history
/// that a start from empty state or from a named savepoint replaced).
pub fn published_by_checkpoints<'a>(
    findings: &'a [(Epoch, EpochFinding)],
    (since, restored): (Epoch, Epoch),
    taken_back: &[Epoch],
) -> Vec<&'a Committable> {
    findings
        .iter()
        .filter_map(|(epoch, finding)| match finding {
            EpochFinding::Valid(m)
                if (since..=restored).contains(epoch)
                    && m.status == ManifestStatus::Committed
                    && !taken_back.contains(epoch) =>
            {
                Some(m)
            }
            _ => None,
        })
        .flat_map(|m| m.sink_committables.iter())
        .collect()
}

/// Of the committables committed checkpoints record as published, those whose sink
/// no longer holds them (`held` false): the missing epochs, by sink. Empty when every
/// sink holds everything.
pub fn missing_published<'a>(
    held: impl IntoIterator<Item = (&'a Committable, bool)>,
) -> BTreeMap<String, BTreeSet<Epoch>> {
    let mut missing: BTreeMap<String, BTreeSet<Epoch>> = BTreeMap::new();
    for (c, held) in held {
        if !held {
            missing.entry(c.sink.clone()).or_default().insert(c.epoch);
        }
    }
    missing
}

/// Whether two listings of a pipeline's epochs show the same checkpoints (epoch, what
/// the manifest is, its status and generation). Recovery lists once before it claims a
/// generation and once after: only when both agree does the plan made from the first
/// stand (docs/engine.md, "Fencing").
pub fn same_listing(a: &[(Epoch, EpochFinding)], b: &[(Epoch, EpochFinding)]) -> bool {
    /// What a listing shows of one epoch.
    #[derive(PartialEq)]
    enum Seen {
        Manifest(ManifestStatus, u64),
        Damaged,
        Partial,
    }
    let seen = |(e, f): &(Epoch, EpochFinding)| {
        let seen = match f {
            EpochFinding::Valid(m) => Seen::Manifest(m.status, m.generation),
            EpochFinding::Damaged(_) => Seen::Damaged,
            EpochFinding::Partial => Seen::Partial,
        };
        (*e, seen)
    };
    a.len() == b.len() && a.iter().map(seen).eq(b.iter().map(seen))
}

/// What recovery does about the owner a sink's output records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnerStep {
    /// The output is this pipeline's (or records no owner yet): record it as ours.
    Claim,
    /// The output is its predecessor's (the state this run was started from came from
    /// there): record this pipeline as the owner instead, keeping the output.
    Inherit,
    /// Another pipeline's output that the user asked to replace: remove it, then
    /// record this pipeline as the owner.
    Replace,
    /// Another pipeline's output: refuse to start (the recorded owner).
    Refuse(OutputOwner),
}

/// Decides what to do about a sink's recorded owner. `ours` is this pipeline's state
/// identity (`None`: its state has none yet, a new state root); `predecessor` the identity
/// of the state a run was explicitly started from; `replace` is `--replace-output`.
pub fn decide_owner(
    recorded: Option<&OutputOwner>,
    ours: Option<&str>,
    predecessor: Option<&str>,
    replace: bool,
) -> OwnerStep {
    match recorded {
        None => OwnerStep::Claim,
        Some(owner) if Some(owner.id.as_str()) == ours => OwnerStep::Claim,
        Some(owner) if Some(owner.id.as_str()) == predecessor => OwnerStep::Inherit,
        Some(_) if replace => OwnerStep::Replace,
        Some(owner) => OwnerStep::Refuse(owner.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(epoch: u64, status: ManifestStatus) -> EpochFinding {
        let mut m = Manifest::prepared("p", 1, Epoch(epoch), 0);
        m.status = status;
        EpochFinding::Valid(m)
    }

    fn with_committables(epoch: u64, status: ManifestStatus, sinks: &[&str]) -> EpochFinding {
        let mut m = Manifest::prepared("p", 1, Epoch(epoch), 0);
        m.status = status;
        for (subtask, sink) in sinks.iter().enumerate() {
            m.sink_committables.push(Committable {
                sink: sink.to_string(),
                subtask,
                epoch: Epoch(epoch),
                payload: String::new(),
            });
        }
        m.held_committables.push(Committable {
            sink: "held".into(),
            subtask: 0,
            epoch: Epoch(epoch),
            payload: String::new(),
        });
        EpochFinding::Valid(m)
    }

    #[test]
    fn only_committed_epochs_up_to_the_restored_one_must_be_held() {
        let findings = vec![
            (
                Epoch(3),
                with_committables(3, ManifestStatus::Committed, &["a", "b"]),
            ),
            (Epoch(4), EpochFinding::Damaged("x".into())),
            (
                Epoch(5),
                with_committables(5, ManifestStatus::Committed, &["a"]),
            ),
            (
                Epoch(6),
                with_committables(6, ManifestStatus::Prepared, &["a"]),
            ),
            (
                Epoch(7),
                with_committables(7, ManifestStatus::Committed, &["a"]),
            ),
        ];
        let must: Vec<(String, u64)> =
            published_by_checkpoints(&findings, (Epoch(1), Epoch(6)), &[])
                .iter()
                .map(|c| (c.sink.clone(), c.epoch.0))
                .collect();
        let expected = [("a", 3), ("b", 3), ("a", 5)].map(|(s, e)| (s.to_string(), e));
        assert_eq!(must, expected);
        // A history replaced from epoch 4 on (a start from empty state there).
        let since_4: Vec<u64> = published_by_checkpoints(&findings, (Epoch(4), Epoch(7)), &[])
            .iter()
            .map(|c| c.epoch.0)
            .collect();
        assert_eq!(since_4, vec![5, 7]);
        // Epoch 5's output was taken back by a fallback past it (damaged): the history
        // goes on from epoch 1, without it.
        let past_5: Vec<u64> =
            published_by_checkpoints(&findings, (Epoch(1), Epoch(7)), &[Epoch(5)])
                .iter()
                .map(|c| c.epoch.0)
                .collect();
        assert_eq!(past_5, vec![3, 3, 7]);
    }

    #[test]
    fn missing_epochs_are_named_by_sink() {
        let findings = vec![
            (
                Epoch(3),
                with_committables(3, ManifestStatus::Committed, &["a", "b"]),
            ),
            (
                Epoch(5),
                with_committables(5, ManifestStatus::Committed, &["a", "a"]),
            ),
        ];
        let must = published_by_checkpoints(&findings, (Epoch(0), Epoch(5)), &[]);
        let held = must
            .iter()
            .map(|c| (*c, c.sink == "b" || c.subtask == 0 && c.epoch.0 == 3));
        let missing = missing_published(held);
        assert_eq!(missing.len(), 1);
        assert_eq!(missing["a"], BTreeSet::from([Epoch(5)]));
        assert!(missing_published(must.iter().map(|c| (*c, true))).is_empty());
    }

    #[test]
    fn newest_committed_is_restored() {
        let plan = plan_recovery(&[
            (Epoch(1), manifest(1, ManifestStatus::Committed)),
            (Epoch(2), manifest(2, ManifestStatus::Committed)),
        ]);
        assert_eq!(plan.restore, Some(Epoch(2)));
        assert!(!plan.roll_forward);
    }

    #[test]
    fn prepared_is_rolled_forward() {
        let plan = plan_recovery(&[
            (Epoch(1), manifest(1, ManifestStatus::Committed)),
            (Epoch(2), manifest(2, ManifestStatus::Prepared)),
        ]);
        assert_eq!(plan.restore, Some(Epoch(2)));
        assert!(plan.roll_forward);
    }

    #[test]
    fn damaged_newest_falls_back_to_previous() {
        let plan = plan_recovery(&[
            (
                Epoch(3),
                EpochFinding::Damaged("checkpoints/epoch=000003/w/000-0.parquet: CRC".into()),
            ),
            (Epoch(2), manifest(2, ManifestStatus::Committed)),
        ]);
        assert_eq!(plan.restore, Some(Epoch(2)));
        assert_eq!(plan.skipped.len(), 1);
        assert!(plan.skipped[0].1.contains("CRC"));
    }

    #[test]
    fn partial_epoch_is_ignored_and_swept() {
        let plan = plan_recovery(&[
            (Epoch(4), EpochFinding::Partial),
            (Epoch(3), manifest(3, ManifestStatus::Committed)),
        ]);
        assert_eq!(plan.restore, Some(Epoch(3)));
        assert_eq!(plan.partial, vec![Epoch(4)]);
    }

    #[test]
    fn nothing_usable_means_no_restore() {
        let plan = plan_recovery(&[(Epoch(1), EpochFinding::Damaged("bad".into()))]);
        assert_eq!(plan.restore, None);
    }

    #[test]
    fn gc_keeps_the_newest_k_and_anything_newer() {
        let findings: Vec<_> = (1..=6)
            .map(|e| {
                (
                    Epoch(e),
                    if e == 6 {
                        EpochFinding::Partial
                    } else {
                        manifest(e, ManifestStatus::Committed)
                    },
                )
            })
            .chain([(Epoch(0), EpochFinding::Partial)])
            .collect();
        // Epoch 6 has no manifest yet (in flight): kept. Retain 3 → keep 3, 4, 5.
        assert_eq!(plan_gc(&findings, 3), vec![Epoch(0), Epoch(1), Epoch(2)]);
    }

    #[test]
    fn gc_never_deletes_a_retained_prepared_epoch_chain() {
        let findings = vec![
            (Epoch(1), manifest(1, ManifestStatus::Committed)),
            (Epoch(2), manifest(2, ManifestStatus::Prepared)),
        ];
        // The PREPARED epoch is newer than every committed one: never a deletion candidate.
        assert_eq!(plan_gc(&findings, 1), Vec::<Epoch>::new());
    }

    fn with_file(epoch: u64, path: &str) -> EpochFinding {
        let mut m = Manifest::prepared("p", 1, Epoch(epoch), 0);
        m.status = ManifestStatus::Committed;
        m.operators.push(crate::manifest::OperatorEntry {
            operator: "join".into(),
            parallelism: 1,
            max_parallelism: 128,
            subtasks: vec![crate::manifest::SubtaskEntry {
                subtask: 0,
                files: vec![crate::manifest::FileEntry {
                    path: path.into(),
                    rows: 1,
                    bytes: 1,
                    crc32c: 0,
                }],
                watermark: None,
            }],
            description: None,
            output_schema: None,
        });
        EpochFinding::Valid(m)
    }

    #[test]
    fn files_reused_by_a_kept_manifest_are_kept() {
        let shared = "checkpoints/epoch=000001/join/000-0.parquet";
        let findings = vec![
            (Epoch(1), with_file(1, shared)),
            (Epoch(2), with_file(2, shared)),
        ];
        let keep = referenced_files(&findings, &[Epoch(1)]);
        assert!(keep.contains(shared), "epoch 2 still reads epoch 1's file");
        assert!(referenced_files(&findings, &[Epoch(1), Epoch(2)]).is_empty());
    }

    #[test]
    fn a_manifest_may_reference_older_epochs_only() {
        let older = with_file(5, "checkpoints/epoch=000003/join/000-0.parquet");
        let newer = with_file(5, "checkpoints/epoch=000007/join/000-0.parquet");
        let outside = with_file(5, "elsewhere/000-0.parquet");
        let check = |f: EpochFinding| match f {
            EpochFinding::Valid(m) => m.validate(),
            _ => unreachable!(),
        };
        assert!(check(older).is_ok());
        assert!(check(newer).unwrap_err().contains("epoch=000007"));
        assert!(check(outside).is_err());
    }

    #[test]
    fn a_prepared_epoch_with_lost_output_is_replayed_only_while_nothing_of_it_is_visible() {
        use StagedOutput::{Lost, Published, Staged};
        assert_eq!(decide_prepared(&[]), PreparedEpoch::RollForward);
        assert_eq!(
            decide_prepared(&[Staged, Published]),
            PreparedEpoch::RollForward
        );
        // A Kafka transaction that died, or staged files that were deleted.
        assert_eq!(decide_prepared(&[Lost, Staged]), PreparedEpoch::Replay);
        // Replaying would publish the visible part again; rolling forward cannot
        // publish the lost part.
        assert_eq!(decide_prepared(&[Lost, Published]), PreparedEpoch::Refuse);
    }

    #[test]
    fn a_listing_that_changed_after_the_claim_is_planned_again() {
        let before = vec![(Epoch(1), manifest(1, ManifestStatus::Committed))];
        assert!(same_listing(&before, &before.clone()));
        // A zombie prepared epoch 2 between the two listings.
        let mut after = before.clone();
        after.push((Epoch(2), manifest(2, ManifestStatus::Prepared)));
        assert!(!same_listing(&before, &after));
        // Or committed epoch 1 that was PREPARED at the first listing.
        let prepared = vec![(Epoch(1), manifest(1, ManifestStatus::Prepared))];
        assert!(!same_listing(&prepared, &before));
        // A partial epoch that gained its manifest.
        let partial = vec![(Epoch(1), EpochFinding::Partial)];
        assert!(!same_listing(&partial, &before));
    }

    fn owner(id: &str) -> OutputOwner {
        OutputOwner {
            id: id.into(),
            pipeline: "q5".into(),
            state: "/s".into(),
        }
    }

    #[test]
    fn unowned_output_and_our_own_are_claimed() {
        assert_eq!(decide_owner(None, None, None, false), OwnerStep::Claim);
        assert_eq!(
            decide_owner(Some(&owner("a")), Some("a"), None, false),
            OwnerStep::Claim
        );
    }

    #[test]
    fn another_pipelines_output_is_refused_unless_replaced() {
        assert_eq!(
            decide_owner(Some(&owner("a")), Some("b"), None, false),
            OwnerStep::Refuse(owner("a"))
        );
        assert_eq!(
            decide_owner(Some(&owner("a")), None, None, false),
            OwnerStep::Refuse(owner("a")),
            "a new state root does not own output another state wrote"
        );
        assert_eq!(
            decide_owner(Some(&owner("a")), Some("b"), None, true),
            OwnerStep::Replace
        );
    }

    #[test]
    fn a_run_started_from_anothers_savepoint_inherits_its_output() {
        assert_eq!(
            decide_owner(Some(&owner("a")), Some("b"), Some("a"), false),
            OwnerStep::Inherit
        );
    }
}
