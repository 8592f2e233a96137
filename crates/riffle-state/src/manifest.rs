//! The checkpoint manifest: the commit point of an epoch, as JSON.

use riffle_core::{Committable, CounterValues, Epoch, KEY_HASH_ALGORITHM};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the manifest and state-file format; a reader refuses other versions.
pub const FORMAT_VERSION: u32 = 1;

/// Where an epoch is in the commit protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ManifestStatus {
    /// Every task acked; the decision to commit is logged, sinks may not have committed.
    Prepared,
    /// Sinks committed; the epoch is complete.
    Committed,
}

/// One state file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Path relative to the pipeline's state directory.
    pub path: String,
    /// Rows in the file.
    pub rows: u64,
    /// Size in bytes.
    pub bytes: u64,
    /// CRC32C of the whole file.
    pub crc32c: u32,
}

/// The files one subtask of an operator wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubtaskEntry {
    /// The subtask.
    pub subtask: usize,
    /// Its files (one per state schema).
    pub files: Vec<FileEntry>,
    /// The subtask's input watermark at the barrier (restored so late rows stay late).
    #[serde(default)]
    pub watermark: Option<i64>,
}

/// One stateful operator (or source) at this epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorEntry {
    /// Stable operator id.
    pub operator: String,
    /// Parallelism the state was taken at.
    pub parallelism: usize,
    /// Number of key groups.
    pub max_parallelism: u16,
    /// Files per subtask.
    pub subtasks: Vec<SubtaskEntry>,
    /// What the operator is (`window aggregate …`), as the plan described it; a new plan
    /// whose operator of this id describes itself otherwise may not fit the state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The operator's output columns (`name: type, …`) when the state was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<String>,
}

/// The manifest of one epoch (`checkpoints/epoch=N/_manifest.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// The pipeline's name.
    pub pipeline: String,
    /// The run that wrote it; an older generation may not commit (fencing).
    pub generation: u64,
    /// The epoch.
    pub epoch: Epoch,
    /// Prepared or committed.
    pub status: ManifestStatus,
    /// When the epoch was triggered, ms since the Unix epoch.
    pub triggered_at_ms: i64,
    /// When the manifest reached its status, ms since the Unix epoch.
    pub written_at_ms: i64,
    /// Smallest watermark over the sinks at the barrier, if any.
    pub watermark: Option<i64>,
    /// The key hash state was partitioned with.
    pub key_hash: String,
    /// A fingerprint of the plan (operator ids, parallelism, schemas).
    pub plan_fingerprint: String,
    /// State of every stateful operator and source.
    pub operators: Vec<OperatorEntry>,
    /// What sinks staged for this epoch, per sink subtask, to commit or re-commit.
    pub sink_committables: Vec<Committable>,
    /// Sink output of this epoch and earlier ones that no epoch has published yet: a
    /// sink whose commits cover several epochs holds it until a later epoch publishes
    /// it with its own. Recovery from this manifest publishes it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held_committables: Vec<Committable>,
    /// Counters at the barrier (late rows dropped, windows emitted, …), job totals.
    pub counters: BTreeMap<String, u64>,
    /// The same counters per operator at the barrier; a resumed run continues them.
    #[serde(default)]
    pub operator_counters: BTreeMap<String, CounterValues>,
    /// Set on a savepoint's manifest (`savepoints/{label}/_manifest.json`): its label.
    /// Its files all lie in its own directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub savepoint: Option<String>,
    /// Set on the epoch a run registers when it starts from an explicit savepoint or
    /// checkpoint (`savepoint sp-000012`, `checkpoint 7`): where its state came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_from: Option<String>,
    /// The identity of the pipeline state that took it (`_identity.json`): a run
    /// started from it elsewhere (a savepoint moved to another state root) continues
    /// that pipeline and inherits the output it owns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_id: Option<String>,
    /// The first epoch of the history this state belongs to: the first epoch of a run
    /// that started from empty state, or the epoch a run started from a named
    /// savepoint or checkpoint registered. Committed epochs from it on published output
    /// that the sinks must still hold when a run resumes (docs/engine.md, "Output a
    /// sink lost"); older epochs belong to a history the user replaced. `None` in
    /// manifests of versions that did not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_from: Option<Epoch>,
    /// Committed epochs of this history whose output a recovery took back (it resumed
    /// past them, their checkpoints skipped as damaged or another pipeline's): the
    /// sinks need not hold them. Carried from manifest to manifest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taken_back: Vec<Epoch>,
    /// Object-store requests and bytes of writing this epoch's state files, from the
    /// trigger to the manifest (what the epoch costs on S3, less its few commit
    /// requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<crate::RequestTally>,
}

impl Manifest {
    /// A prepared manifest with empty operator and sink lists.
    pub fn prepared(pipeline: &str, generation: u64, epoch: Epoch, triggered_at_ms: i64) -> Self {
        Self {
            format_version: FORMAT_VERSION,
            pipeline: pipeline.to_string(),
            generation,
            epoch,
            status: ManifestStatus::Prepared,
            triggered_at_ms,
            written_at_ms: triggered_at_ms,
            watermark: None,
            key_hash: KEY_HASH_ALGORITHM.to_string(),
            plan_fingerprint: String::new(),
            operators: Vec::new(),
            sink_committables: Vec::new(),
            held_committables: Vec::new(),
            counters: BTreeMap::new(),
            operator_counters: BTreeMap::new(),
            savepoint: None,
            restored_from: None,
            state_id: None,
            history_from: None,
            taken_back: Vec::new(),
            requests: None,
        }
    }

    /// Every file the manifest references, as relative paths (GC keeps them).
    pub fn file_paths(&self) -> impl Iterator<Item = String> + '_ {
        self.files().map(|f| f.path.clone())
    }

    /// Every file the manifest references.
    pub fn files(&self) -> impl Iterator<Item = &FileEntry> {
        self.operators
            .iter()
            .flat_map(|o| o.subtasks.iter().flat_map(|s| s.files.iter()))
    }

    /// Checks the invariants a manifest must hold before it is written and after it is
    /// read; returns what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.format_version != FORMAT_VERSION {
            return Err(format!(
                "format version {} (this riffle reads version {FORMAT_VERSION})",
                self.format_version
            ));
        }
        if self.epoch.0 == 0 {
            return Err("epoch 0 is not a checkpoint".into());
        }
        if self.key_hash != KEY_HASH_ALGORITHM {
            return Err(format!(
                "state was partitioned with key hash `{}`, this riffle uses `{KEY_HASH_ALGORITHM}`",
                self.key_hash
            ));
        }
        // A checkpoint's file lies in its epoch's directory or, reused unchanged, in an
        // older one's, or in the savepoint a run started from; a savepoint's files lie in
        // its own directory (it is self-contained).
        let own_savepoint = self
            .savepoint
            .as_ref()
            .map(|label| format!("{}/", crate::layout::savepoint_dir_name(label)));
        let in_epoch = |path: &str| match &own_savepoint {
            Some(dir) => path.starts_with(dir.as_str()),
            None => {
                path.starts_with("savepoints/")
                    || path
                        .strip_prefix("checkpoints/")
                        .and_then(|rest| rest.split_once('/'))
                        .and_then(|(dir, _)| crate::layout::parse_epoch_dir(dir))
                        .is_some_and(|e| e <= self.epoch)
            }
        };
        if let Some(label) = &self.savepoint {
            crate::layout::check_label(label)?;
        }
        for op in &self.operators {
            if op.parallelism == 0 || op.parallelism > usize::from(op.max_parallelism) {
                return Err(format!(
                    "operator `{}` has parallelism {} with max parallelism {}",
                    op.operator, op.parallelism, op.max_parallelism
                ));
            }
            for s in &op.subtasks {
                if s.subtask >= op.parallelism {
                    return Err(format!(
                        "operator `{}` lists subtask {} of {}",
                        op.operator, s.subtask, op.parallelism
                    ));
                }
                if let Some(f) = s.files.iter().find(|f| !in_epoch(&f.path)) {
                    return Err(match &self.savepoint {
                        Some(label) => format!(
                            "file {} lies outside savepoint `{label}`'s directory",
                            f.path
                        ),
                        None => format!(
                            "file {} lies outside the directories of epochs up to {}",
                            f.path, self.epoch
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}
