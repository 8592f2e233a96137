//! A restored subtask's state as read from the checkpoint: its files checked and still
//! encoded, decoded one batch at a time when the subtask restores, so that a restore
//! holds the encoded checkpoint and one decoded batch, not the whole state decoded
//! (docs/engine.md, "State beyond memory").

use crate::restored_chains::ChainSeed;
use bytes::Bytes;
use riffle_core::arrow::array::{AsArray, BooleanArray};
use riffle_core::arrow::compute::filter_record_batch;
use riffle_core::arrow::datatypes::UInt16Type;
use riffle_core::state::KEY_GROUP_FIELD;
use riffle_core::{KeyGroup, OperatorState, RecordBatch};
use riffle_state::{state_file, FileEntry};

/// A batch, or why it could not be read.
pub type StateBatch = Result<RecordBatch, String>;

/// One old subtask's state, in checkpoint order: files whose size and CRC32C were
/// checked when they were read, still encoded (or batches already in memory, as tests
/// and tools build them).
#[derive(Debug, Clone, Default)]
pub struct StateFiles(Vec<Part>);

#[derive(Debug, Clone)]
enum Part {
    Encoded(FileEntry, Bytes),
    Decoded(RecordBatch),
}

impl StateFiles {
    /// Files read and checked ([`riffle_state::CheckpointStore::read_checked`]), in order.
    pub fn encoded(files: Vec<(FileEntry, Bytes)>) -> Self {
        Self(
            files
                .into_iter()
                .map(|(e, b)| Part::Encoded(e, b))
                .collect(),
        )
    }

    /// The batches in order, each file decoded as it is reached.
    pub fn batches(&self) -> impl Iterator<Item = StateBatch> + '_ {
        self.batches_in_files().map(|(_, batch)| batch)
    }

    /// The batches in order, each with the file it came from (none for a batch that
    /// was in memory).
    fn batches_in_files(&self) -> impl Iterator<Item = (Option<&FileEntry>, StateBatch)> + '_ {
        type InFile<'a> = Box<dyn Iterator<Item = (Option<&'a FileEntry>, StateBatch)> + 'a>;
        self.0.iter().flat_map(|part| -> InFile<'_> {
            match part {
                Part::Decoded(batch) => Box::new(std::iter::once((None, Ok(batch.clone())))),
                Part::Encoded(entry, bytes) => {
                    match state_file::decode_checked(entry, bytes.clone()) {
                        Ok(batches) => Box::new(
                            batches.map(move |b| (Some(entry), b.map_err(|e| e.to_string()))),
                        ),
                        Err(e) => Box::new(std::iter::once((Some(entry), Err(e.to_string())))),
                    }
                }
            }
        })
    }

    /// Every batch, decoded.
    ///
    /// # Errors
    /// A file that does not decode, named.
    pub fn decode(&self) -> Result<OperatorState, String> {
        Ok(OperatorState::of(self.batches().collect::<Result<_, _>>()?))
    }
}

impl From<OperatorState> for StateFiles {
    fn from(state: OperatorState) -> Self {
        Self(state.batches.into_iter().map(Part::Decoded).collect())
    }
}

/// What one subtask restores: the state of the old subtasks it takes over and, after
/// a rescale, which key groups of theirs are its own.
#[derive(Debug, Clone, Default)]
pub struct RestoredState {
    parts: Vec<StateFiles>,
    keep: Option<Keep>,
    /// Set when the subtask restores its own files as the checkpoint wrote them, and
    /// may continue their chain ([`crate::restored_chains`]).
    seed: Option<ChainSeed>,
}

/// Rows whose key group belongs to `subtask` of `parallelism`.
#[derive(Debug, Clone, Copy)]
struct Keep {
    subtask: usize,
    parallelism: usize,
    max_parallelism: u16,
}

impl Keep {
    fn rows_of(&self, batch: &RecordBatch) -> StateBatch {
        let Some(groups) = batch
            .column_by_name(KEY_GROUP_FIELD)
            .and_then(|c| c.as_primitive_opt::<UInt16Type>())
        else {
            return Err(format!(
                "a state batch has no UInt16 `{KEY_GROUP_FIELD}` column"
            ));
        };
        let mine: BooleanArray = groups
            .values()
            .iter()
            .map(|g| {
                let owner = KeyGroup(*g).subtask(self.parallelism, self.max_parallelism);
                Some(owner == self.subtask)
            })
            .collect();
        filter_record_batch(batch, &mine).map_err(|e| e.to_string())
    }
}

impl RestoredState {
    /// All of `parts`' batches.
    pub(crate) fn whole(parts: Vec<StateFiles>) -> Self {
        Self {
            parts,
            keep: None,
            seed: None,
        }
    }

    /// A subtask's own files, as the checkpoint wrote them, whose chain it may
    /// continue: noted through `seed`.
    pub(crate) fn own_files(files: StateFiles, seed: Option<ChainSeed>) -> Self {
        Self {
            seed,
            ..Self::whole(vec![files])
        }
    }

    /// This state, whose files may be continued from only if `allowed` (the writer
    /// references files only of operators whose state is stable).
    pub(crate) fn continuing_if(self, allowed: bool) -> Self {
        Self {
            seed: self.seed.filter(|_| allowed),
            ..self
        }
    }

    /// Where to note a continued chain, when this state is a subtask's own files as
    /// the checkpoint wrote them.
    pub fn seed(&self) -> Option<&ChainSeed> {
        self.seed.as_ref()
    }

    /// The rows of `parts` whose key groups belong to `subtask` of `parallelism`.
    pub(crate) fn key_groups_of(
        parts: Vec<StateFiles>,
        subtask: usize,
        parallelism: usize,
        max_parallelism: u16,
    ) -> Self {
        let keep = Keep {
            subtask,
            parallelism,
            max_parallelism,
        };
        Self {
            parts,
            keep: Some(keep),
            seed: None,
        }
    }

    /// The batches in order, decoded one at a time; after a rescale, only this
    /// subtask's rows, and batches left with none are skipped.
    pub fn batches(&self) -> impl Iterator<Item = StateBatch> + '_ {
        self.batches_in_files().map(|(_, batch)| batch)
    }

    /// [`batches`](Self::batches), each with the file it came from.
    pub fn batches_in_files(&self) -> impl Iterator<Item = (Option<&FileEntry>, StateBatch)> + '_ {
        let keep = self.keep;
        (self.parts.iter().flat_map(StateFiles::batches_in_files)).filter_map(
            move |(file, batch)| {
                let (Ok(batch), Some(keep)) = (&batch, keep) else {
                    return Some((file, batch));
                };
                match keep.rows_of(batch) {
                    Ok(rows) if rows.num_rows() == 0 => None,
                    kept => Some((file, kept)),
                }
            },
        )
    }

    /// Every batch, decoded.
    ///
    /// # Errors
    /// A file that does not decode, or a batch without key groups after a rescale.
    pub fn decode(&self) -> Result<OperatorState, String> {
        Ok(OperatorState::of(self.batches().collect::<Result<_, _>>()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::{Int64Array, UInt16Array};
    use riffle_core::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    /// A state batch of (key group, value) rows.
    fn batch(rows: &[(u16, i64)]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new(KEY_GROUP_FIELD, DataType::UInt16, false),
            Field::new("v", DataType::Int64, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(UInt16Array::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            ],
        )
        .unwrap()
    }

    /// A state file as a checkpoint holds it: encoded, with its manifest entry.
    fn file(batches: Vec<RecordBatch>) -> (FileEntry, Bytes) {
        let mut encoded = state_file::encode("op", &OperatorState::of(batches)).unwrap();
        assert_eq!(encoded.len(), 1, "one schema, one file");
        let encoded = encoded.remove(0);
        let entry = FileEntry {
            path: "op/0/state.parquet".into(),
            rows: encoded.rows,
            bytes: encoded.bytes.len() as u64,
            crc32c: encoded.crc32c,
        };
        (entry, encoded.bytes)
    }

    fn values(batches: impl Iterator<Item = StateBatch>) -> Vec<i64> {
        let mut out = Vec::new();
        for b in batches {
            let b = b.unwrap();
            let v = b
                .column(1)
                .as_primitive::<riffle_core::arrow::datatypes::Int64Type>();
            out.extend(v.values().iter().copied());
        }
        out
    }

    #[test]
    fn encoded_files_decode_in_order_one_batch_at_a_time() {
        let first = file(vec![batch(&[(0, 1), (1, 2)]), batch(&[(2, 3)])]);
        let second = file(vec![batch(&[(3, 4)])]);
        let files = StateFiles::encoded(vec![first, second]);
        let state = RestoredState::whole(vec![files]);
        assert_eq!(values(state.batches()), [1, 2, 3, 4]);
        assert_eq!(state.decode().unwrap().rows(), 4);
    }

    #[test]
    fn after_a_rescale_a_subtask_gets_only_its_key_groups_rows() {
        let rows: Vec<(u16, i64)> = (0..8).map(|g| (g, i64::from(g))).collect();
        let parts = vec![StateFiles::encoded(vec![file(vec![batch(&rows)])])];
        let of = |subtask| {
            let state = RestoredState::key_groups_of(parts.clone(), subtask, 2, 8);
            values(state.batches())
        };
        let (zero, one) = (of(0), of(1));
        assert!(!zero.is_empty() && !one.is_empty());
        let mut all: Vec<i64> = zero.iter().chain(&one).copied().collect();
        all.sort_unstable();
        assert_eq!(
            all,
            (0..8).collect::<Vec<_>>(),
            "each row goes to one subtask"
        );
        for v in zero {
            assert_eq!(KeyGroup(v as u16).subtask(2, 8), 0);
        }
    }

    #[test]
    fn a_file_whose_rows_differ_from_the_manifest_is_an_error_at_its_end() {
        let (mut entry, bytes) = file(vec![batch(&[(0, 1)])]);
        entry.rows = 2;
        let state = RestoredState::whole(vec![StateFiles::encoded(vec![(entry, bytes)])]);
        let err = state.decode().unwrap_err();
        assert!(err.contains("1 rows, the manifest records 2"), "{err}");
    }
}
