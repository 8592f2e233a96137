//! Object paths of a pipeline's checkpoints (docs/state-format.md, "Layout").

use object_store::path::Path as ObjectPath;
use riffle_core::Epoch;

/// The name of an epoch's commit marker, beside its manifest.
pub const COMMITTED_MARKER: &str = "_committed.json";

/// The paths under one pipeline's state.
#[derive(Debug, Clone)]
pub struct Layout {
    base: String,
}

impl Layout {
    /// Paths for `pipeline` under `prefix`.
    pub fn new(prefix: &ObjectPath, pipeline: &str) -> Self {
        let base = if prefix.as_ref().is_empty() {
            pipeline.to_string()
        } else {
            format!("{}/{pipeline}", prefix.as_ref())
        };
        Self { base }
    }

    /// The pipeline's directory under the state root.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `checkpoints/`.
    pub fn checkpoints(&self) -> ObjectPath {
        ObjectPath::from(format!("{}/checkpoints", self.base))
    }

    /// `checkpoints/epoch=000042/`.
    pub fn epoch_dir(&self, epoch: Epoch) -> ObjectPath {
        ObjectPath::from(format!(
            "{}/checkpoints/{}",
            self.base,
            epoch_dir_name(epoch)
        ))
    }

    /// `checkpoints/epoch=000042/_manifest.json`.
    pub fn manifest(&self, epoch: Epoch) -> ObjectPath {
        ObjectPath::from(format!(
            "{}/checkpoints/{}/_manifest.json",
            self.base,
            epoch_dir_name(epoch)
        ))
    }

    /// `checkpoints/epoch=000042/{operator}/{subtask:03}-g{generation}-{part}.parquet`:
    /// the generation is in the name so that a late write of an older process can never
    /// replace a file a newer one wrote for the same epoch.
    pub fn state_file(
        &self,
        epoch: Epoch,
        generation: u64,
        operator: &str,
        subtask: usize,
        part: usize,
    ) -> ObjectPath {
        ObjectPath::from(format!(
            "{}/checkpoints/{}/{operator}/{subtask:03}-g{generation}-{part}.parquet",
            self.base,
            epoch_dir_name(epoch)
        ))
    }

    /// `_latest.json`.
    pub fn latest(&self) -> ObjectPath {
        ObjectPath::from(format!("{}/_latest.json", self.base))
    }

    /// `_generation.json`: the newest run's generation as older versions recorded it
    /// (read for fencing, never written).
    pub fn legacy_generation(&self) -> ObjectPath {
        ObjectPath::from(format!("{}/_generation.json", self.base))
    }

    /// `_identity.json`: the identity of this pipeline's state.
    pub fn identity(&self) -> ObjectPath {
        ObjectPath::from(format!("{}/_identity.json", self.base))
    }

    /// `_generations/`: one claim per run, created with a conditional create (fencing;
    /// docs/engine.md, "Fencing").
    pub fn generation_claims(&self) -> ObjectPath {
        ObjectPath::from(format!("{}/_generations", self.base))
    }

    /// `_generations/gen=000007.json`: the claim of generation 7.
    pub fn generation_claim(&self, generation: u64) -> ObjectPath {
        ObjectPath::from(format!(
            "{}/_generations/gen={generation:06}.json",
            self.base
        ))
    }

    /// `savepoints/`.
    pub fn savepoints(&self) -> ObjectPath {
        ObjectPath::from(format!("{}/savepoints", self.base))
    }

    /// `savepoints/{label}/`.
    pub fn savepoint_dir(&self, label: &str) -> ObjectPath {
        ObjectPath::from(format!("{}/{}", self.base, savepoint_dir_name(label)))
    }

    /// `checkpoints/epoch=000042/_committed.json`: the epoch's sinks committed (see
    /// [`CheckpointStore::commit`](crate::CheckpointStore::commit)).
    pub fn committed_marker(&self, epoch: Epoch) -> ObjectPath {
        ObjectPath::from(format!(
            "{}/checkpoints/{}/{COMMITTED_MARKER}",
            self.base,
            epoch_dir_name(epoch)
        ))
    }

    /// `savepoints/{label}/_manifest.json`.
    pub fn savepoint_manifest(&self, label: &str) -> ObjectPath {
        ObjectPath::from(format!(
            "{}/{}/_manifest.json",
            self.base,
            savepoint_dir_name(label)
        ))
    }

    /// `savepoints/{label}/{operator}/{subtask:03}-{part}.parquet`, relative to the
    /// pipeline's base (as manifests record it).
    pub fn savepoint_file(label: &str, operator: &str, subtask: usize, part: usize) -> String {
        format!(
            "{}/{operator}/{subtask:03}-{part}.parquet",
            savepoint_dir_name(label)
        )
    }

    /// `_control.json`: where a running job of this pipeline serves its control endpoint.
    pub fn control(&self) -> ObjectPath {
        ObjectPath::from(format!("{}/_control.json", self.base))
    }

    /// `_control/worker-{worker}.json`: where worker `worker` of a job on several
    /// workers serves its control endpoint (each worker its own record).
    pub fn worker_control(&self, worker: usize) -> ObjectPath {
        ObjectPath::from(format!("{}/_control/worker-{worker}.json", self.base))
    }

    /// `_control/`: the workers' control records.
    pub fn worker_controls_dir(&self) -> ObjectPath {
        ObjectPath::from(format!("{}/_control", self.base))
    }

    /// `_control_token`: the job's secret. A request that changes the running job
    /// presents it (every request, when the endpoint is open to the network), and every
    /// stream and call between the job's workers carries it.
    pub fn control_token(&self) -> ObjectPath {
        ObjectPath::from(format!("{}/_control_token", self.base))
    }

    /// `recovery/`.
    pub fn recovery_dir(&self) -> ObjectPath {
        ObjectPath::from(format!("{}/recovery", self.base))
    }

    /// `recovery/{at_ms:013}-g{generation}.json` (zero-padded so names sort by time; the
    /// generation keeps two runs recovering in the same millisecond apart).
    pub fn recovery_record(&self, at_ms: i64, generation: u64) -> ObjectPath {
        ObjectPath::from(format!(
            "{}/recovery/{at_ms:013}-g{generation}.json",
            self.base
        ))
    }

    /// The path relative to the pipeline's base (what manifests record).
    pub fn relative(&self, path: &ObjectPath) -> String {
        path.as_ref()
            .strip_prefix(&format!("{}/", self.base))
            .unwrap_or(path.as_ref())
            .to_string()
    }

    /// A relative path back to an object path.
    pub fn absolute(&self, relative: &str) -> ObjectPath {
        ObjectPath::from(format!("{}/{relative}", self.base))
    }
}

/// `savepoints/{label}` (relative to the pipeline's base).
pub fn savepoint_dir_name(label: &str) -> String {
    format!("savepoints/{label}")
}

/// Checks that `label` can name a savepoint: 1 to 100 of `A-Z a-z 0-9 . _ -`, not
/// starting with a dot (it becomes a directory name on every store).
///
/// # Errors
/// What is wrong with it.
pub fn check_label(label: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if label.is_empty() || label.len() > 100 {
        return Err(format!(
            "savepoint label `{label}` must have 1 to 100 characters"
        ));
    }
    if label.starts_with('.') || !label.chars().all(ok_char) {
        return Err(format!(
            "savepoint label `{label}` may only use letters, digits, `.`, `_` and `-`, and may not start with `.`"
        ));
    }
    Ok(())
}

/// `epoch=000042`.
pub fn epoch_dir_name(epoch: Epoch) -> String {
    format!("epoch={:06}", epoch.0)
}

/// Whether the state file at `path` (relative to the pipeline) was written by `epoch`:
/// it lies in that epoch's directory. A file reused from an earlier epoch lies in the
/// directory of the epoch that wrote it.
pub fn written_by(path: &str, epoch: Epoch) -> bool {
    path.strip_prefix("checkpoints/")
        .and_then(|rest| rest.strip_prefix(&epoch_dir_name(epoch)))
        .is_some_and(|rest| rest.starts_with('/'))
}

/// The generation of a `gen=000007.json` claim's file name.
pub fn parse_generation_claim(name: &str) -> Option<u64> {
    name.strip_prefix("gen=")?
        .strip_suffix(".json")?
        .parse()
        .ok()
}

/// The epoch of an `epoch=000042` directory name.
pub fn parse_epoch_dir(name: &str) -> Option<Epoch> {
    name.strip_prefix("epoch=")?.parse().ok().map(Epoch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_file_was_written_by_the_epoch_whose_directory_holds_it() {
        let path = "checkpoints/epoch=000042/agg/001-g3-0.parquet";
        assert!(written_by(path, Epoch(42)));
        assert!(!written_by(path, Epoch(43)));
        assert!(
            !written_by(path, Epoch(4)),
            "epoch=000004 is not a prefix of it"
        );
    }
}
