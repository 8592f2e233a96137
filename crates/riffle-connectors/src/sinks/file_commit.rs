//! The file sink's committer: publishing what subtasks staged (renames), marking the
//! partitions every subtask's watermark closed (`_SUCCESS`), and what recovery asks of
//! the output — what is published, what to take back, what to discard (docs/engine.md,
//! "Exactly-once output").

use super::files::FileSinkFactory;
use super::partitions::{written_dirs, SUCCESS_FILE};
use riffle_core::{
    Committable, Committer, Epoch, Error, EventTime, Result, StagedOutput, Unpublished,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

impl Committer for FileSinkFactory {
    fn commit(&self, committable: &Committable) -> Result<()> {
        let staged = StagedFiles::of(committable)?;
        let mut dirs = std::collections::BTreeSet::new();
        for file in &staged.files {
            let from = self.dir.join(&file.staged);
            let to = self.dir.join(&file.target);
            match std::fs::rename(&from, &to) {
                Ok(()) => {}
                // Renamed by an earlier commit of the same epoch: idempotent.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && to.exists() => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(Error::io(
                        &from,
                        std::io::Error::new(
                            e.kind(),
                            format!(
                                "staged output of epoch {} is gone and {} was never published",
                                committable.epoch,
                                to.display()
                            ),
                        ),
                    ))
                }
                Err(e) => return Err(Error::io(&to, e)),
            }
            dirs.insert(to.parent().map(Path::to_path_buf).unwrap_or_default());
        }
        dirs.insert(self.dir.clone());
        dirs.iter().try_for_each(|d| sync_dir(d))
    }

    // The files first; then the partitions every subtask's watermark closed are
    // marked, so a partition's `_SUCCESS` never precedes a file of it.
    fn commit_all(&self, committables: &[&Committable]) -> Result<()> {
        for committable in committables {
            self.commit(committable)?;
        }
        let Some(commit) = self.partitioning.as_ref().and_then(|p| p.commit.as_ref()) else {
            return Ok(());
        };
        let Some(newest) = committables.iter().map(|c| c.epoch).max() else {
            return Ok(());
        };
        let mut watermarks: BTreeMap<usize, EventTime> = BTreeMap::new();
        let mut parallelism = usize::MAX;
        let mut pending = std::collections::BTreeSet::new();
        for c in committables.iter().filter(|c| c.epoch == newest) {
            if let Some(mark) = StagedFiles::of(c)?.mark {
                watermarks.insert(c.subtask, mark.watermark);
                parallelism = mark.parallelism;
                pending.extend(mark.pending);
            }
        }
        // Every subtask's word is needed: one that lags holds the partitions open.
        if watermarks.len() < parallelism {
            return Ok(());
        }
        let watermark = watermarks.values().copied().min().unwrap_or(EventTime::MIN);
        // The partitions to look at: once per process every one on disk (those written
        // before a restart), then those the subtasks name as written and unmarked.
        let candidates: Vec<String> = if self.scanned.swap(true, Ordering::SeqCst) {
            pending.into_iter().collect()
        } else {
            written_dirs(&self.dir)?
                .into_iter()
                .filter(|d| !d.is_empty())
                .chain(pending)
                .collect()
        };
        for dir in candidates {
            let partition = self.dir.join(&dir);
            let marker = partition.join(SUCCESS_FILE);
            if marker.exists() || !commit.closes(&dir, watermark) || !holds_output(&partition)? {
                continue;
            }
            // The epoch that marked it, so a recovery that takes that epoch back
            // takes the mark back too.
            let body = serde_json::json!({ "epoch": newest.0 }).to_string();
            write_durably(&marker, body.as_bytes())?;
        }
        Ok(())
    }

    fn staged_output(&self, committable: &Committable) -> Result<StagedOutput> {
        let staged = StagedFiles::of(committable)?;
        let published = staged
            .files
            .iter()
            .any(|f| self.dir.join(&f.target).exists());
        let all_staged = staged
            .files
            .iter()
            .all(|f| self.dir.join(&f.staged).exists());
        Ok(match (published, all_staged) {
            (true, _) => StagedOutput::Published,
            (false, true) => StagedOutput::Staged,
            (false, false) => StagedOutput::Lost,
        })
    }

    // Every file of the epoch under its published name: one removed since is lost.
    fn holds_published(&self, committables: &[&Committable]) -> Result<Vec<bool>> {
        committables
            .iter()
            .map(|c| {
                let staged = StagedFiles::of(c)?;
                Ok(staged
                    .files
                    .iter()
                    .all(|f| self.dir.join(&f.target).exists()))
            })
            .collect()
    }

    // A file is named after the epoch that staged it and published by that epoch or a
    // later one, so every file named after `after` was published after it.
    fn unpublish(&self, after: Epoch) -> Result<Unpublished> {
        let removed = self.remove_files(|path, name| {
            published_epoch(name).is_some_and(|e| e > after)
                || (name == SUCCESS_FILE && marked_epoch(path).is_some_and(|e| e > after))
        })?;
        Ok(Unpublished::Removed(removed))
    }

    fn published(&self) -> Result<usize> {
        let mut count = 0;
        for dir in self.dirs()? {
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io(&dir, e)),
            };
            count += entries
                .flatten()
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|name| published_epoch(name).is_some())
                })
                .count();
        }
        Ok(count)
    }

    fn abort_staged(&self, generation: u64) -> Result<usize> {
        self.remove_files(|_, name| {
            name.ends_with(STAGED_EXTENSION)
                && staged_generation(name).is_none_or(|g| g < generation)
        })
    }
}

impl FileSinkFactory {
    /// The directories files may have been written into: the sink's, and every
    /// partition directory under it at any depth (this run's partitioning or an
    /// earlier run's).
    fn dirs(&self) -> Result<Vec<PathBuf>> {
        Ok(written_dirs(&self.dir)?
            .into_iter()
            .map(|rel| self.dir.join(rel))
            .collect())
    }

    /// Removes the files of every directory written into that `remove` picks.
    fn remove_files(&self, remove: impl Fn(&Path, &str) -> bool) -> Result<usize> {
        let mut removed = 0;
        for dir in self.dirs()? {
            removed += remove_files(&dir, &remove)?;
        }
        Ok(removed)
    }
}

/// Whether a partition directory holds a published file (a partition this job wrote,
/// not one left empty by a take-back or made by someone else).
fn holds_output(dir: &Path) -> Result<bool> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    Ok(entries.flatten().any(|e| {
        e.file_name()
            .to_str()
            .is_some_and(|name| published_epoch(name).is_some())
    }))
}

/// Writes `bytes` into `path` so that it survives a crash whole or not at all: a
/// temporary file, synced, renamed into place, the directory synced.
fn write_durably(path: &Path, bytes: &[u8]) -> Result<()> {
    let temporary = path.with_extension("riffle-tmp");
    let mut file = File::create(&temporary).map_err(|e| Error::io(&temporary, e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| Error::io(&temporary, e))?;
    std::fs::rename(&temporary, path).map_err(|e| Error::io(path, e))?;
    sync_dir(path.parent().unwrap_or(path))
}

/// The epoch a `_SUCCESS` file names (`None`: not one of riffle's).
fn marked_epoch(path: &Path) -> Option<Epoch> {
    let text = std::fs::read_to_string(path).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value["epoch"].as_u64().map(Epoch)
}

/// Removes the files in `dir` whose names `remove` picks (none when `dir` does not
/// exist), making the removals durable; returns how many.
fn remove_files(dir: &Path, remove: impl Fn(&Path, &str) -> bool) -> Result<usize> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut removed = 0;
    for entry in entries {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        let picked = path
            .file_name()
            .is_some_and(|n| remove(&path, &n.to_string_lossy()));
        if picked {
            std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
            removed += 1;
        }
    }
    if removed > 0 {
        sync_dir(dir)?;
    }
    Ok(removed)
}

/// Extension of files not yet published.
pub(super) const STAGED_EXTENSION: &str = "inprogress";

/// The epoch in a published file's name (`part-003-e000012-000.jsonl` → 12).
fn published_epoch(name: &str) -> Option<Epoch> {
    if name.ends_with(STAGED_EXTENSION) {
        return None;
    }
    let mut parts = name.strip_prefix("part-")?.split('-');
    parts.next()?; // subtask
    let epoch = parts.next()?.strip_prefix('e')?;
    let _k = parts.next()?;
    epoch.parse().ok().map(Epoch)
}

/// The generation in a staged file's name (`.part-000-g7-00001.jsonl.inprogress` → 7;
/// names of older versions lack the dot); `None` for names without one (written before
/// generations were in names).
fn staged_generation(name: &str) -> Option<u64> {
    let rest = name.trim_start_matches('.').strip_prefix("part-")?;
    let (_, rest) = rest.split_once("-g")?;
    let (generation, _) = rest.split_once('-')?;
    generation.parse().ok()
}

/// The committable of one subtask's epoch: staged files and the names they commit to
/// (relative to the sink's directory: a partition's files name its directory).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct StagedFiles {
    pub(super) files: Vec<StagedFile>,
    /// With a partition commit: the subtask's watermark at the barrier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) mark: Option<WatermarkMark>,
}

/// Where one subtask's event time stood at a barrier, how many subtasks there are, and
/// the partitions it published files into that are not marked yet.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct WatermarkMark {
    pub(super) watermark: EventTime,
    pub(super) parallelism: usize,
    #[serde(default)]
    pub(super) pending: Vec<String>,
}

impl StagedFiles {
    /// The file list a committable of this sink carries.
    fn of(committable: &Committable) -> Result<Self> {
        committable.decode("a file list")
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct StagedFile {
    /// Name of the staged file in the sink directory.
    pub(super) staged: String,
    /// Name it gets when the epoch commits.
    pub(super) target: String,
}

/// Makes renames and deletions in `dir` durable.
pub(super) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

#[cfg(test)]
mod tests {
    use super::{published_epoch, staged_generation};
    use riffle_core::Epoch;

    #[test]
    fn published_names_carry_their_epoch() {
        assert_eq!(
            published_epoch("part-003-e000012-000.jsonl"),
            Some(Epoch(12))
        );
        assert_eq!(published_epoch("part-000-g7-00001.jsonl.inprogress"), None);
        // Written without checkpoints: no epoch, never taken back.
        assert_eq!(published_epoch("part-000-00001.jsonl"), None);
    }

    #[test]
    fn staged_names_carry_their_generation() {
        assert_eq!(
            staged_generation("part-000-g7-00001.jsonl.inprogress"),
            Some(7)
        );
        assert_eq!(
            staged_generation("part-012-g123-00000.parquet.inprogress"),
            Some(123)
        );
        // Names of older versions have none: any recovery may discard them.
        assert_eq!(staged_generation("part-000-00001.jsonl.inprogress"), None);
        assert_eq!(staged_generation("notes.txt"), None);
    }
}
