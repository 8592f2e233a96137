//! State loaded from a checkpoint, handed to operator subtasks at start — redistributed
//! by key group when an operator's parallelism changed.

use crate::restore_share::{state_bytes, RestoreShare};
use crate::restored_chains::{ChainSeed, RestoredChains};
use crate::restored_state::{RestoredState, StateFiles};
use riffle_core::{CounterValues, Epoch, EventTime, OperatorId};
use riffle_state::{CheckpointStore, Manifest, StateResult};
use std::collections::HashMap;

/// Whose state is being restored: operators rescale by key group; sources only if
/// their factory says they can ([`SourceFactory::can_rescale`](riffle_core::SourceFactory::can_rescale)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateOwner {
    /// An operator. `keyed`: every input is partitioned by key
    /// ([`keyed`](crate::restore_share::keyed)), so each row of its state carries a key
    /// group its subtask owned; an operator that is not (a local stage) may write rows
    /// in any key group, and after a rescale needs every old subtask's state.
    Operator { keyed: bool },
    /// A source.
    Source {
        /// It restores from every old subtask's position at another parallelism.
        can_rescale: bool,
        /// It restores from every old subtask's position at the same parallelism too.
        from_every_subtask: bool,
    },
}

/// Where a restored subtask's event time resumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoredWatermark {
    /// The checkpoint holds nothing of the operator.
    NotHeld,
    /// Held, but (some of) the old subtasks whose data this one takes over had no
    /// watermark yet.
    Unknown,
    /// Held, at this watermark.
    At(EventTime),
}

/// One operator's state as checkpointed.
#[derive(Debug, Clone)]
pub struct RestoredOperator {
    /// Parallelism at the checkpoint.
    pub parallelism: usize,
    /// Key groups at the checkpoint.
    pub max_parallelism: u16,
    /// State per old subtask (those this process read: see `read`), still encoded.
    pub subtasks: HashMap<usize, StateFiles>,
    /// The old subtasks whose state this process read; `None`: all of them.
    pub read: Option<std::collections::BTreeSet<usize>>,
    /// Input watermark per old subtask at the checkpoint.
    pub watermarks: HashMap<usize, EventTime>,
}

/// Everything a job restores from one checkpoint.
#[derive(Debug, Clone)]
pub struct RestoredJob {
    /// The checkpoint's epoch.
    pub epoch: Epoch,
    /// State per operator id.
    pub operators: HashMap<OperatorId, RestoredOperator>,
    /// Counters per operator at the checkpoint.
    pub counters: HashMap<OperatorId, CounterValues>,
    /// State bytes read, and the checkpoint's total.
    pub bytes: (u64, u64),
    /// Where subtasks note the chains they continue from this checkpoint's files; none
    /// for a savepoint or a run's named start, whose files the user owns
    /// ([`crate::restored_chains`]).
    pub chains: Option<RestoredChains>,
}

impl RestoredJob {
    /// Reads every state file `manifest` references, checking sizes and CRC32C, and
    /// keeps them encoded: each subtask decodes its own as it restores.
    ///
    /// # Errors
    /// A damaged or missing file, named.
    pub async fn load(store: &CheckpointStore, manifest: &Manifest) -> StateResult<Self> {
        Self::load_share(store, manifest, None).await
    }

    /// Reads the state files `manifest` references that `share` says this process
    /// needs (all without one); watermarks of every subtask are in the manifest itself.
    ///
    /// # Errors
    /// As [`load`](Self::load).
    pub async fn load_share(
        store: &CheckpointStore,
        manifest: &Manifest,
        share: Option<&RestoreShare>,
    ) -> StateResult<Self> {
        let mut operators = HashMap::new();
        for op in &manifest.operators {
            let mut subtasks = HashMap::new();
            let mut watermarks = HashMap::new();
            for s in &op.subtasks {
                if let Some(w) = s.watermark {
                    watermarks.insert(s.subtask, w);
                }
                if !share.is_none_or(|share| share.reads(&op.operator, s.subtask)) {
                    continue;
                }
                let mut files = Vec::with_capacity(s.files.len());
                for file in &s.files {
                    files.push((file.clone(), store.read_checked(file).await?));
                }
                subtasks.insert(s.subtask, StateFiles::encoded(files));
            }
            let read = share.map(|share| share.read_of(&op.operator, op.parallelism));
            operators.insert(
                OperatorId(op.operator.clone()),
                RestoredOperator {
                    parallelism: op.parallelism,
                    max_parallelism: op.max_parallelism,
                    subtasks,
                    read,
                    watermarks,
                },
            );
        }
        Ok(Self {
            epoch: manifest.epoch,
            chains: None,
            bytes: state_bytes(manifest, share),
            operators,
            counters: manifest
                .operator_counters
                .iter()
                .map(|(id, v)| (OperatorId(id.clone()), *v))
                .collect(),
        })
    }

    /// This checkpoint, restored by a run whose first epoch is `first_epoch`, whose
    /// stateful subtasks may go on from their own files ([`crate::restored_chains`]):
    /// only if `manifest` (this checkpoint's) is the job's own checkpoint, not a
    /// savepoint or a named start's, whose files are the user's. No epoch between
    /// this one and `first_epoch` (partial ones recovery swept, damaged ones it
    /// skipped) is anyone's base, so to the run the state before its first epoch is
    /// this one's.
    pub fn continuing_from(mut self, manifest: &Manifest, first_epoch: Epoch) -> Self {
        let own_checkpoint = manifest.savepoint.is_none() && manifest.restored_from.is_none();
        let before_first = Epoch(first_epoch.0.saturating_sub(1));
        self.chains = (own_checkpoint && before_first >= self.epoch)
            .then(|| RestoredChains::new(before_first));
        self
    }

    /// Keeps only the old subtasks `share` names, after a load of `manifest` that read
    /// (and checked) every file: what the process holds from then on is its share.
    /// `bytes` then counts the kept state's file bytes.
    pub fn keep_share(mut self, share: &RestoreShare, manifest: &Manifest) -> Self {
        for (id, op) in self.operators.iter_mut() {
            let read = share.read_of(&id.0, op.parallelism);
            op.subtasks.retain(|s, _| read.contains(s));
            op.read = Some(read);
        }
        self.bytes = state_bytes(manifest, Some(share));
        self
    }

    /// The watermark subtask `subtask` of `parallelism` resumes at, when the checkpoint
    /// holds `operator`: its own at the same parallelism, else the smallest of the old
    /// subtasks' (a safe lower bound). `Unknown` — no watermark yet — is the lowest of
    /// all: an old subtask that had none may have data still to come from the very
    /// start of event time, and a restored subtask never starts ahead of it.
    ///
    /// A source restoring `from_every_subtask` resumes at the smallest of all.
    pub fn watermark_for(
        &self,
        operator: &OperatorId,
        subtask: usize,
        parallelism: usize,
        from_every_subtask: bool,
    ) -> RestoredWatermark {
        let Some(restored) = self.operators.get(operator) else {
            return RestoredWatermark::NotHeld;
        };
        let known = |s: &usize| restored.watermarks.get(s).copied();
        let lowest = if restored.parallelism == parallelism && !from_every_subtask {
            known(&subtask)
        } else {
            (0..restored.parallelism)
                .map(|s| known(&s))
                .min_by_key(|w| w.unwrap_or(EventTime::MIN))
                .flatten()
        };
        match lowest {
            Some(w) => RestoredWatermark::At(w),
            None => RestoredWatermark::Unknown,
        }
    }

    /// The state subtask `subtask` of `parallelism` restores, or `None` for an operator
    /// the checkpoint does not hold. It is decoded as the subtask reads it.
    ///
    /// # Errors
    /// A source that cannot rescale asked to change parallelism, or a different number
    /// of key groups.
    pub fn state_for(
        &self,
        operator: &OperatorId,
        subtask: usize,
        parallelism: usize,
        max_parallelism: u16,
        owner: StateOwner,
    ) -> Result<Option<RestoredState>, String> {
        let Some(restored) = self.operators.get(operator) else {
            return Ok(None);
        };
        if restored.max_parallelism != max_parallelism {
            return Err(format!(
                "the checkpoint has {} key groups and the job {max_parallelism}; max parallelism cannot change",
                restored.max_parallelism
            ));
        }
        let from_every_subtask = matches!(
            owner,
            StateOwner::Source {
                from_every_subtask: true,
                ..
            }
        );
        // A process that read only its share must have read what this subtask needs:
        // state handed out from a share it does not cover would be lost silently.
        if let Some(read) = &restored.read {
            let needed = match owner {
                StateOwner::Source { .. } => (0..restored.parallelism).collect(),
                StateOwner::Operator { keyed } => crate::restore_share::old_subtasks_needed(
                    keyed,
                    &[subtask],
                    parallelism,
                    restored.parallelism,
                    max_parallelism,
                ),
            };
            if let Some(missing) = needed.iter().find(|s| !read.contains(s)) {
                return Err(format!(
                    "subtask {subtask} needs the state of old subtask {missing}, which this worker did not read (a bug in its restore share)"
                ));
            }
        }
        if restored.parallelism == parallelism && !from_every_subtask {
            let own = restored.subtasks.get(&subtask).cloned().unwrap_or_default();
            // Its own files as written: an operator may continue their chain.
            let seed = match owner {
                StateOwner::Operator { .. } => (self.chains.clone()).map(|chains| ChainSeed {
                    chains,
                    operator: operator.0.clone(),
                    subtask,
                }),
                StateOwner::Source { .. } => None,
            };
            return Ok(Some(RestoredState::own_files(own, seed)));
        }
        // Every old subtask, in order: a source works out its part from every position;
        // an operator keeps the rows of its key groups from all of them, since a row's
        // key group need not be one its old subtask owned (a local stage, not keyed,
        // writes all its rows in key group 0).
        let mut old: Vec<_> = restored.subtasks.iter().collect();
        old.sort_by_key(|(s, _)| **s);
        let old = old.into_iter().map(|(_, files)| files.clone()).collect();
        match owner {
            StateOwner::Source {
                can_rescale: false, ..
            } => Err(format!(
                "the source was checkpointed at parallelism {} and cannot restore at {parallelism}; run it at {}",
                restored.parallelism, restored.parallelism
            )),
            // Every old subtask's position: the source works out which part is its own.
            StateOwner::Source {
                can_rescale: true, ..
            } => Ok(Some(RestoredState::whole(old))),
            // Rescale: the rows of every old subtask whose key group this subtask owns.
            StateOwner::Operator { .. } => Ok(Some(RestoredState::key_groups_of(
                old,
                subtask,
                parallelism,
                max_parallelism,
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::datatypes::Schema;
    use riffle_core::{OperatorState, RecordBatch};
    use std::sync::Arc;

    /// A source checkpointed at parallelism 2 whose subtask 1 had no watermark yet.
    fn one_subtask_without_watermark() -> RestoredJob {
        let source = RestoredOperator {
            parallelism: 2,
            max_parallelism: 128,
            subtasks: HashMap::new(),
            read: None,
            watermarks: HashMap::from([(0, 5_000)]),
        };
        RestoredJob {
            epoch: Epoch(3),
            operators: HashMap::from([(OperatorId("kafka".into()), source)]),
            counters: HashMap::new(),
            bytes: (0, 0),
            chains: None,
        }
    }

    #[test]
    fn an_unknown_watermark_is_the_lowest_after_a_rescale() {
        let job = one_subtask_without_watermark();
        let id = OperatorId("kafka".into());
        // At parallelism 1 the subtask takes over old subtask 1's partitions, which
        // had delivered nothing: it must not start at old subtask 0's watermark.
        assert_eq!(
            job.watermark_for(&id, 0, 1, false),
            RestoredWatermark::Unknown
        );
        assert_eq!(
            job.watermark_for(&id, 2, 3, false),
            RestoredWatermark::Unknown
        );
        // At the same parallelism each subtask resumes at its own.
        assert_eq!(
            job.watermark_for(&id, 0, 2, false),
            RestoredWatermark::At(5_000)
        );
        assert_eq!(
            job.watermark_for(&id, 1, 2, false),
            RestoredWatermark::Unknown
        );
        let other = OperatorId("new".into());
        assert_eq!(
            job.watermark_for(&other, 0, 1, false),
            RestoredWatermark::NotHeld
        );
    }

    /// A source at parallelism 2 with one state batch per subtask and both watermarks.
    fn two_positioned_subtasks() -> (RestoredJob, OperatorId) {
        let positions = |rows| {
            OperatorState::of(vec![
                RecordBatch::new_empty(Arc::new(Schema::empty()));
                rows
            ])
        };
        let id = OperatorId("files".into());
        let source = RestoredOperator {
            parallelism: 2,
            max_parallelism: 128,
            subtasks: HashMap::from([(0, positions(1).into()), (1, positions(2).into())]),
            read: None,
            watermarks: HashMap::from([(0, 5_000), (1, 3_000)]),
        };
        let job = RestoredJob {
            epoch: Epoch(3),
            operators: HashMap::from([(id.clone(), source)]),
            counters: HashMap::new(),
            bytes: (0, 0),
            chains: None,
        };
        (job, id)
    }

    #[test]
    fn a_share_without_an_old_subtask_a_stage_that_is_not_keyed_needs_is_refused() {
        // A worker read old subtask 0 of an operator checkpointed at p2, and restores
        // subtask 0 of p4: enough for a keyed operator (its key groups were all old
        // subtask 0's), not for one that is not keyed (its rows of key group 0 may lie
        // in old subtask 1 too).
        let id = OperatorId("local".into());
        let op = RestoredOperator {
            parallelism: 2,
            max_parallelism: 128,
            subtasks: HashMap::from([(0, OperatorState::default().into())]),
            read: Some(std::collections::BTreeSet::from([0])),
            watermarks: HashMap::new(),
        };
        let job = RestoredJob {
            epoch: Epoch(3),
            operators: HashMap::from([(id.clone(), op)]),
            counters: HashMap::new(),
            bytes: (0, 0),
            chains: None,
        };
        let keyed = |keyed| job.state_for(&id, 0, 4, 128, StateOwner::Operator { keyed });
        assert!(keyed(true).is_ok());
        let err = keyed(false).unwrap_err();
        assert!(err.contains("old subtask 1"), "{err}");
    }

    #[test]
    fn a_source_restoring_from_every_subtask_gets_all_states_at_the_same_parallelism() {
        let (job, id) = two_positioned_subtasks();
        let owner = |from_every_subtask| StateOwner::Source {
            can_rescale: true,
            from_every_subtask,
        };
        let batches = |subtask, owner| {
            job.state_for(&id, subtask, 2, 128, owner)
                .unwrap()
                .unwrap()
                .decode()
                .unwrap()
                .batches
                .len()
        };
        assert_eq!(batches(0, owner(false)), 1, "its own");
        assert_eq!(batches(1, owner(false)), 2, "its own");
        assert_eq!(batches(0, owner(true)), 3, "every old subtask's");
        assert_eq!(batches(1, owner(true)), 3, "every old subtask's");
        // It resumes at the lowest watermark, as after a rescale.
        assert_eq!(
            job.watermark_for(&id, 0, 2, true),
            RestoredWatermark::At(3_000)
        );
        assert_eq!(
            job.watermark_for(&id, 0, 2, false),
            RestoredWatermark::At(5_000)
        );
    }
}
