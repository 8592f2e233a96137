//! Object paths of a pipeline's checkpoints (DESIGN §5).

use object_store::path::Path as ObjectPath;
use riffle_core::Epoch;

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

    /// `checkpoints/epoch=000042/{operator}/{subtask:03}-{part}.parquet`.
    pub fn state_file(
        &self,
        epoch: Epoch,
        operator: &str,
        subtask: usize,
        part: usize,
    ) -> ObjectPath {
        ObjectPath::from(format!(
            "{}/checkpoints/{}/{operator}/{subtask:03}-{part}.parquet",
            self.base,
            epoch_dir_name(epoch)
        ))
    }

    /// `_latest.json`.
    pub fn latest(&self) -> ObjectPath {
        ObjectPath::from(format!("{}/_latest.json", self.base))
    }

    /// `_generation.json`: the newest run's generation (fencing).
    pub fn generation(&self) -> ObjectPath {
        ObjectPath::from(format!("{}/_generation.json", self.base))
    }

    /// `recovery/`.
    pub fn recovery_dir(&self) -> ObjectPath {
        ObjectPath::from(format!("{}/recovery", self.base))
    }

    /// `recovery/{at_ms:013}.json` (zero-padded so names sort by time).
    pub fn recovery_record(&self, at_ms: i64) -> ObjectPath {
        ObjectPath::from(format!("{}/recovery/{at_ms:013}.json", self.base))
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

/// `epoch=000042`.
pub fn epoch_dir_name(epoch: Epoch) -> String {
    format!("epoch={:06}", epoch.0)
}

/// The epoch of an `epoch=000042` directory name.
pub fn parse_epoch_dir(name: &str) -> Option<Epoch> {
    name.strip_prefix("epoch=")?.parse().ok().map(Epoch)
}
