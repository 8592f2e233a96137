//! The spill tier: where a stateful subtask keeps the groups that do not fit its share
//! of `--state-memory` (docs/engine.md, "State beyond memory").
//!
//! It is a cache, not a commit point: a checkpoint still holds every group, the spilled
//! ones included, so a restart (which starts with an empty tier) loses nothing. The tier
//! is an LSM tree (`fjall`) in a directory of its own under the spill directory, named
//! by the process id so that a process started after a kill -9 removes what the killed
//! one left ([`sweep_abandoned`]).

mod codec;
mod restored;

pub(crate) use codec::ValueCodec;
pub(crate) use restored::RestoredGroups;

use fjall::config::PinningPolicy;
use riffle_core::{Error, Result, StateMemory};
use std::path::{Path, PathBuf};

/// How a tier's directory name starts; the process id follows.
const TIER_PREFIX: &str = "riffle-tier-";

/// fjall's background threads per tier (flushes and compactions). Two, not one: a
/// worker blocked sending itself a flush (its queue full of rotation requests) is
/// freed by the other's next receive, and worker 0 flushes while the other compacts,
/// so fjall's own write stall (at 4 sealed memtables) bounds the tier's memory. With
/// one, the tier stopped flushing and its memtable grew with everything spilled
/// (docs/engine.md, "State beyond memory"). The cost: while one compacts, fjall has
/// worker 0 re-queue compaction requests in a loop, about 13% of a budgeted run's CPU
/// samples. (Making one worker safe by waiting in our writes needs the active
/// memtable's size, which fjall does not expose.)
const FJALL_WORKERS: usize = 2;

/// Tables fjall lets gather in its first level before merging them into the next.
/// Its default, 4, merges every four memtables' worth of groups into the whole of the
/// next level (spilled keys come in no order, so every merge overlaps all of it).
const L0_TABLES: u8 = 16;

/// Per level of the tree, whether filters and indexes are partitioned.
const PARTITIONED_BELOW_FIRST_LEVEL: [bool; 2] = [false, true];

/// fjall's least journal limit; past it, fjall flushes to free old journals.
const MAX_JOURNAL_BYTES: u64 = 64 << 20;

/// Groups written (or removed) per fjall write batch. fjall asks its workers to rotate
/// a full memtable once per write, and drops the request when their queue is full;
/// once per batch, the queue stays short and no request is lost.
const WRITE_BATCH: usize = 4096;

/// A group leaving memory for the tier.
pub(crate) struct Leaving {
    /// Its key's bytes.
    pub(crate) key: Vec<u8>,
    /// Its encoded state.
    pub(crate) value: Vec<u8>,
    /// It changed (or is new) since the last snapshot: the next one must write it.
    pub(crate) changed: bool,
}

/// Groups a subtask moved out of memory: key bytes → encoded state.
pub(crate) struct SpillStore {
    // Field order: the keyspaces go before their database.
    keys: fjall::Keyspace,
    /// Keys of the groups that left changed since the last snapshot (empty values).
    changed: fjall::Keyspace,
    db: fjall::Database,
    path: PathBuf,
    len: usize,
    /// Notes of changed groups since they were last forgotten (a key noted twice
    /// counts twice).
    noted: usize,
    /// Bytes of the keys and values held (before the tree's compression).
    bytes: u64,
    /// `len` and `bytes` are exact, not bounds ([`ingest`](Self::ingest)).
    counted: bool,
}

fn failed(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Spill(format!("{}: {e}", path.display()))
}

impl SpillStore {
    /// A fresh, empty tier for subtask `subtask` of `operator` under `memory.spill_dir`,
    /// removed when dropped.
    ///
    /// # Errors
    /// The directory cannot be made or the store cannot open there.
    pub(crate) fn open(memory: &StateMemory, operator: &str, subtask: usize) -> Result<Self> {
        let name: String = operator
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path = memory.spill_dir.join(format!(
            "{TIER_PREFIX}{}-{name}-{subtask}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path).map_err(|e| Error::io(&path, e))?;
        // Small caches and memtables: what they hold counts against the budget too.
        let cache = (memory.bytes / 16).clamp(1 << 20, 64 << 20);
        let db = fjall::Database::builder(&path)
            .temporary(true)
            .manual_journal_persist(true)
            .worker_threads(FJALL_WORKERS)
            // The least journal fjall allows: the tier is a cache, never recovered
            // from its journal, so journals only cost disk.
            .max_journaling_size(MAX_JOURNAL_BYTES)
            .cache_size(cache)
            .open()
            .map_err(|e| failed(&path, e))?;
        let memtable = (memory.bytes / 16).clamp(1 << 20, 16 << 20);
        let keys = db
            .keyspace("groups", || {
                fjall::KeyspaceCreateOptions::default()
                    .max_memtable_size(memtable)
                    // Below the first level, filters and indexes in partitions: fjall
                    // pins only the first level's, so a lookup there read a whole
                    // table's filter block, where it now reads one partition. A
                    // restore's runs (`ingest`) are written with these too.
                    .filter_block_partitioning_policy(PinningPolicy::new(
                        PARTITIONED_BELOW_FIRST_LEVEL,
                    ))
                    .index_block_partitioning_policy(PinningPolicy::new(
                        PARTITIONED_BELOW_FIRST_LEVEL,
                    ))
                    .compaction_strategy(std::sync::Arc::new(
                        fjall::compaction::Leveled::default()
                            .with_l0_threshold(L0_TABLES)
                            .with_table_target_size(32 << 20),
                    ))
            })
            .map_err(|e| failed(&path, e))?;
        let changed = db
            .keyspace("changed", || {
                fjall::KeyspaceCreateOptions::default().max_memtable_size(memtable)
            })
            .map_err(|e| failed(&path, e))?;
        Ok(Self {
            keys,
            changed,
            db,
            path,
            len: 0,
            noted: 0,
            bytes: 0,
            counted: true,
        })
    }

    /// Groups held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Groups noted as changed, at most ([`drain_changed`](Self::drain_changed)).
    pub(crate) fn noted_changed(&self) -> usize {
        self.noted
    }

    /// Bytes of the groups held (keys and encoded state, before compression).
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Adds groups that are not in the tier (each key once), noting those that
    /// changed since the last snapshot.
    ///
    /// # Errors
    /// The store failed (a full disk).
    pub(crate) fn put_all(&mut self, groups: Vec<Leaving>) -> Result<()> {
        let n = groups.len();
        let mut groups = groups.into_iter().peekable();
        while groups.peek().is_some() {
            let mut batch = self.db.batch();
            for group in groups.by_ref().take(WRITE_BATCH) {
                self.bytes += (group.key.len() + group.value.len()) as u64;
                if group.changed {
                    batch.insert(&self.changed, group.key.as_slice(), []);
                    self.noted += 1;
                }
                batch.insert(&self.keys, group.key, group.value);
            }
            batch.commit().map_err(|e| failed(&self.path, e))?;
        }
        self.len += n;
        Ok(())
    }

    /// Writes restored `groups` as one run of the tree, in key order (fjall's bulk
    /// ingestion, past its journal and memtables), each replacing the tier's group of
    /// its key; then empties `groups`. None is noted as changed: the checkpoint they
    /// came from holds them as they are. Into a tier that holds groups, the counts are
    /// only bounds until [`recount`](Self::recount): looking each key up instead made
    /// the lookups most of a large restore's time.
    ///
    /// # Errors
    /// The store failed (a full disk).
    pub(crate) fn ingest(&mut self, groups: &mut RestoredGroups) -> Result<()> {
        if groups.is_empty() {
            return Ok(());
        }
        self.counted &= self.len == 0;
        let (mut added, mut bytes) = (0usize, 0u64);
        let mut ingestion = self
            .keys
            .start_ingestion()
            .map_err(|e| failed(&self.path, e))?;
        groups.drain_sorted(|key, value| {
            added += 1;
            bytes += (key.len() + value.len()) as u64;
            ingestion
                .write(key, value)
                .map_err(|e| failed(&self.path, e))
        })?;
        ingestion.finish().map_err(|e| failed(&self.path, e))?;
        self.len += added;
        self.bytes += bytes;
        Ok(())
    }

    /// Counts the groups held and their bytes anew, when runs written by
    /// [`ingest`](Self::ingest) may have replaced groups: one pass over the tier.
    ///
    /// # Errors
    /// The store failed.
    pub(crate) fn recount(&mut self) -> Result<()> {
        if self.counted {
            return Ok(());
        }
        let (mut len, mut bytes) = (0usize, 0u64);
        for guard in self.keys.iter() {
            let (key, value) = guard.into_inner().map_err(|e| failed(&self.path, e))?;
            len += 1;
            bytes += (key.len() + value.len()) as u64;
        }
        (self.len, self.bytes, self.counted) = (len, bytes, true);
        Ok(())
    }

    /// Takes the groups of `keys` (distinct) out of the tier: the state of each, or
    /// `None` where it is not there.
    ///
    /// # Errors
    /// The store failed.
    pub(crate) fn take_all(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        if self.len == 0 {
            return Ok(vec![None; keys.len()]);
        }
        let mut taken = Vec::with_capacity(keys.len());
        for keys in keys.chunks(WRITE_BATCH) {
            let mut batch = self.db.batch();
            for key in keys {
                let value = self.keys.get(key).map_err(|e| failed(&self.path, e))?;
                if let Some(value) = &value {
                    batch.remove(&self.keys, key.as_slice());
                    self.len -= 1;
                    self.bytes = self.bytes.saturating_sub((key.len() + value.len()) as u64);
                }
                taken.push(value.map(|v| v.to_vec()));
            }
            if !batch.is_empty() {
                batch.commit().map_err(|e| failed(&self.path, e))?;
            }
        }
        Ok(taken)
    }

    /// Up to `n` groups (key bytes, encoded state) in key order, those after key `after`
    /// (from the first when `None`).
    ///
    /// # Errors
    /// The store failed.
    pub(crate) fn chunk_after(
        &self,
        after: Option<&[u8]>,
        n: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        use std::ops::Bound;
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        let mut held = Vec::with_capacity(n.min(self.len));
        for guard in self.keys.range::<&[u8], _>((start, Bound::Unbounded)) {
            if held.len() == n {
                break;
            }
            let (key, value) = guard.into_inner().map_err(|e| failed(&self.path, e))?;
            held.push((key.to_vec(), value.to_vec()));
        }
        Ok(held)
    }

    /// The groups that left memory changed since the last snapshot and are still in the
    /// tier, in chunks of at most `chunk`, to `each` (key bytes, encoded state); then
    /// forgets them, as the snapshot that called this holds them. (One that came back
    /// to memory is new there, and in the snapshot's own batch.)
    ///
    /// # Errors
    /// The store failed, or `each` did.
    pub(crate) fn drain_changed(
        &mut self,
        chunk: usize,
        mut each: impl FnMut(&[(Vec<u8>, Vec<u8>)]) -> Result<()>,
    ) -> Result<()> {
        let mut held = Vec::new();
        for guard in self.changed.iter() {
            let key = guard.key().map_err(|e| failed(&self.path, e))?;
            if let Some(value) = self.keys.get(&key).map_err(|e| failed(&self.path, e))? {
                held.push((key.to_vec(), value.to_vec()));
            }
            if held.len() == chunk {
                each(&held)?;
                held.clear();
            }
        }
        if !held.is_empty() {
            each(&held)?;
        }
        self.forget_changed()
    }

    /// Forgets which groups left changed: a snapshot wrote the whole tier.
    ///
    /// # Errors
    /// The store failed.
    pub(crate) fn forget_changed(&mut self) -> Result<()> {
        if self.noted == 0 {
            return Ok(());
        }
        self.noted = 0;
        // (fjall drops the unflushed notes without taking them off its count of
        // unflushed bytes, `write_buffer_size`: nothing here may wait on that count.)
        self.changed.clear().map_err(|e| failed(&self.path, e))
    }

    /// Every group as it is now, in key order and chunks of at most `chunk`, read later
    /// and on any thread: a snapshot of the tier that later writes do not change. It
    /// keeps the tier's files (and the tier) until dropped.
    pub(crate) fn snapshot_chunks(&self, chunk: usize) -> GroupChunks {
        use fjall::Readable;
        GroupChunks {
            groups: self.db.snapshot().iter(&self.keys),
            chunk: chunk.max(1),
            path: self.path.clone(),
            _db: self.db.clone(),
        }
    }
}

/// The tier's groups as of a [`SpillStore::snapshot_chunks`], a chunk at a time.
pub(crate) struct GroupChunks {
    // Field order: the iterator (and its snapshot) goes before its database.
    groups: fjall::Iter,
    chunk: usize,
    path: PathBuf,
    _db: fjall::Database,
}

impl Iterator for GroupChunks {
    type Item = Result<Vec<(Vec<u8>, Vec<u8>)>>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut held = Vec::with_capacity(self.chunk);
        for guard in self.groups.by_ref() {
            match guard.into_inner() {
                Ok((key, value)) => held.push((key.to_vec(), value.to_vec())),
                Err(e) => return Some(Err(failed(&self.path, e))),
            }
            if held.len() == self.chunk {
                break;
            }
        }
        (!held.is_empty()).then_some(Ok(held))
    }
}

/// Removes the tiers under `dir` that processes no longer running left behind (a tier
/// is removed when its subtask ends, but not after a kill -9). Only directories named
/// as [`SpillStore::open`] names them are touched. A spill directory shared between
/// machines or containers (other process ids) must not be: give each its own.
pub fn sweep_abandoned(dir: &Path) {
    // Without /proc, whether a process runs cannot be told: leave everything.
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(TIER_PREFIX))
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let running = Path::new("/proc").join(pid.to_string()).exists();
        // A directory itself, not a link to one elsewhere.
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if !running && is_dir {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaving(key: &str, changed: bool) -> Leaving {
        Leaving {
            key: key.into(),
            value: format!("state of {key}").into(),
            changed,
        }
    }

    #[test]
    fn groups_that_left_changed_are_listed_once_while_in_the_tier() {
        let dir = tempfile::tempdir().unwrap();
        let memory = StateMemory {
            bytes: 1 << 20,
            spill_dir: dir.path().to_path_buf(),
        };
        let mut store = SpillStore::open(&memory, "op", 0).unwrap();
        let groups = ["a", "b", "c", "d"].map(|k| leaving(k, k != "b"));
        store.put_all(groups.into()).unwrap();
        // "c" comes back to memory: the snapshot's own batch holds it.
        assert_eq!(
            store.take_all(&[b"c".to_vec()]).unwrap(),
            [Some(b"state of c".to_vec())]
        );
        let drained = |store: &mut SpillStore| {
            let mut all = Vec::new();
            store
                .drain_changed(1, |groups| {
                    all.extend(groups.iter().cloned());
                    Ok(())
                })
                .unwrap();
            all
        };
        assert_eq!(
            drained(&mut store),
            [
                (b"a".to_vec(), b"state of a".to_vec()),
                (b"d".to_vec(), b"state of d".to_vec())
            ]
        );
        assert!(drained(&mut store).is_empty(), "a snapshot wrote them");
        assert_eq!(store.len(), 3, "they stay in the tier");
    }

    #[test]
    fn ingested_groups_replace_those_of_their_key_and_are_counted_once() {
        let dir = tempfile::tempdir().unwrap();
        let memory = StateMemory {
            bytes: 1 << 20,
            spill_dir: dir.path().to_path_buf(),
        };
        let mut store = SpillStore::open(&memory, "op", 0).unwrap();
        store.put_all(vec![leaving("a", false)]).unwrap();
        let mut groups = RestoredGroups::default();
        for (k, v) in [("c", "c1"), ("b", "b1"), ("c", "c2")] {
            groups.push(k.as_bytes(), v.as_bytes());
        }
        store.ingest(&mut groups).unwrap();
        for (k, v) in [("a", "a2"), ("d", "d1")] {
            groups.push(k.as_bytes(), v.as_bytes());
        }
        store.ingest(&mut groups).unwrap();
        assert_eq!(store.len(), 5, "a bound until counted");
        store.recount().unwrap();
        assert_eq!(store.len(), 4);
        assert_eq!(
            store.bytes(),
            [("a", "a2"), ("b", "b1"), ("c", "c2"), ("d", "d1")]
                .iter()
                .map(|(k, v)| (k.len() + v.len()) as u64)
                .sum::<u64>()
        );
        assert_eq!(
            store.chunk_after(None, 10).unwrap(),
            [("a", "a2"), ("b", "b1"), ("c", "c2"), ("d", "d1")]
                .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        );
        let mut changed = 0;
        store
            .drain_changed(10, |g| {
                changed += g.len();
                Ok(())
            })
            .unwrap();
        assert_eq!(
            changed, 0,
            "restored groups are as the checkpoint holds them"
        );
    }

    #[test]
    fn spilled_groups_are_flushed_out_of_memory() {
        let dir = tempfile::tempdir().unwrap();
        // A 32 MiB budget: 2 MiB memtables.
        let memory = StateMemory {
            bytes: 32 << 20,
            spill_dir: dir.path().to_path_buf(),
        };
        let mut store = SpillStore::open(&memory, "op", 0).unwrap();
        let mut x: u64 = 12345;
        // About 40 MiB of groups with keys in no order, in batches as evictions
        // write them.
        for _ in 0..150 {
            let groups = (0..2000)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let key = format!("{x:016x}https://www.nexmark.com/item?channel={}", x % 997);
                    Leaving {
                        key: key.into_bytes(),
                        value: x.to_le_bytes().repeat(5),
                        changed: false,
                    }
                })
                .collect();
            store.put_all(groups).unwrap();
        }
        assert_eq!(store.len(), 300_000);
        // Once the writes stop, the tier flushes what it holds down to at most the
        // active memtable (2 MiB, and what one write batch takes it over). A tier that
        // stopped flushing keeps nearly all of it (38 MiB, measured), however long it
        // waits.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let unflushed = loop {
            let unflushed = store.db.write_buffer_size();
            if unflushed < 4 << 20 || std::time::Instant::now() > deadline {
                break unflushed;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        assert!(unflushed < 4 << 20, "{unflushed} bytes stayed unflushed");
    }
}
