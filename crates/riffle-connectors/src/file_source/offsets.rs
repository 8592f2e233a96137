//! The file source's checkpointed offsets: for each split a subtask owns, its bounds
//! and how far it was read, by path, so that any subtask of any parallelism can pick
//! out its own splits from the state of all old subtasks (a rescale). The offsets of
//! earlier versions (a position per whole file, or one file's position) restore too.

use super::split::{Split, TO_END};
use riffle_core::arrow::array::UInt64Array;
use riffle_core::arrow::array::{AsArray, BooleanArray, StringArray, UInt16Array};
use riffle_core::arrow::datatypes::{DataType, Field, Schema, UInt64Type};
use riffle_core::state::KEY_GROUP_FIELD;
use riffle_core::{Error, OperatorState, RecordBatch, Result};
use std::collections::HashMap;
use std::sync::Arc;

/// How far a split was read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct SplitPosition {
    /// See [`super::reader::Extent::position`].
    pub position: u64,
    /// Read to its end.
    pub done: bool,
}

/// A split as a checkpoint saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SavedSplit {
    pub start: u64,
    pub end: u64,
    pub at: SplitPosition,
}

/// One row per split: file, start, end, position, done.
pub(super) fn offsets_state(splits: &[(&Split, SplitPosition)]) -> Result<OperatorState> {
    let schema = Arc::new(Schema::new(vec![
        Field::new(KEY_GROUP_FIELD, DataType::UInt16, false),
        Field::new("file", DataType::Utf8, false),
        Field::new("start", DataType::UInt64, false),
        Field::new("end", DataType::UInt64, false),
        Field::new("position", DataType::UInt64, false),
        Field::new("done", DataType::Boolean, false),
    ]));
    let u64s = |f: fn(&(&Split, SplitPosition)) -> u64| {
        Arc::new(UInt64Array::from_iter_values(splits.iter().map(f)))
    };
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(UInt16Array::from(vec![0u16; splits.len()])),
            Arc::new(StringArray::from_iter_values(
                splits.iter().map(|(s, _)| s.path.display().to_string()),
            )),
            u64s(|(s, _)| s.start),
            u64s(|(s, _)| s.end),
            u64s(|(_, at)| at.position),
            Arc::new(BooleanArray::from_iter(
                splits.iter().map(|(_, at)| Some(at.done)),
            )),
        ],
    )?;
    Ok(OperatorState::of(vec![batch]))
}

/// What a checkpoint says about the source's files.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum SavedOffsets {
    /// Every split any old subtask owned, by path, in order of their starts.
    Splits(HashMap<String, Vec<SavedSplit>>),
    /// An earlier version's: every file any old subtask owned, read whole, with the
    /// lines (JSON lines, CSV) or rows (Parquet) read.
    Files(HashMap<String, SplitPosition>),
    /// An older version's: the one file being read (by index in the subtask's list)
    /// and the lines or rows read of it; restores only at parallelism 1.
    Single {
        path: String,
        file: u64,
        position: u64,
    },
}

/// Reads what [`offsets_state`] (or an earlier version) wrote, from the state of every
/// old subtask.
pub(super) fn read_saved_offsets(state: &OperatorState, operator: &str) -> Result<SavedOffsets> {
    let bad = || Error::State {
        operator: operator.into(),
        message: "file source offsets need columns file, start, end, position and done".into(),
    };
    let mut splits: HashMap<String, Vec<SavedSplit>> = HashMap::new();
    let mut files = HashMap::new();
    for batch in &state.batches {
        let path = batch
            .column_by_name("file")
            .and_then(|c| c.as_string_opt::<i32>())
            .ok_or_else(bad)?;
        let u64s = |n: &str| {
            batch
                .column_by_name(n)
                .and_then(|c| c.as_primitive_opt::<UInt64Type>())
                .ok_or_else(bad)
        };
        let position = u64s("position")?;
        let Some(done) = batch
            .column_by_name("done")
            .and_then(|c| c.as_boolean_opt())
        else {
            if state.batches.len() != 1 || batch.num_rows() != 1 {
                return Err(bad());
            }
            return Ok(SavedOffsets::Single {
                path: path.value(0).to_string(),
                file: u64s("file_index")?.value(0),
                position: position.value(0),
            });
        };
        let at = |row| SplitPosition {
            position: position.value(row),
            done: done.value(row),
        };
        if batch.column_by_name("start").is_none() {
            for row in 0..batch.num_rows() {
                files.insert(path.value(row).to_string(), at(row));
            }
            continue;
        }
        let (start, end) = (u64s("start")?, u64s("end")?);
        for row in 0..batch.num_rows() {
            splits
                .entry(path.value(row).to_string())
                .or_default()
                .push(SavedSplit {
                    start: start.value(row),
                    end: end.value(row),
                    at: at(row),
                });
        }
    }
    if !files.is_empty() {
        if !splits.is_empty() {
            return Err(bad());
        }
        return Ok(SavedOffsets::Files(files));
    }
    for saved in splits.values_mut() {
        saved.sort_by_key(|s| s.start);
        saved.dedup();
    }
    Ok(SavedOffsets::Splits(splits))
}

/// An earlier version's whole-file position as a split of the whole file.
pub(super) fn whole_file(position: u64, done: bool) -> Vec<SavedSplit> {
    vec![SavedSplit {
        start: 0,
        end: TO_END,
        at: SplitPosition { position, done },
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn splits_are_saved_and_read_back_by_path_in_order() {
        let a = Split {
            path: PathBuf::from("in/a.jsonl"),
            start: 100,
            end: TO_END,
        };
        let b = Split {
            start: 0,
            end: 100,
            ..a.clone()
        };
        let at = |position, done| SplitPosition { position, done };
        let state = offsets_state(&[(&a, at(150, false)), (&b, at(0, true))]).unwrap();
        let SavedOffsets::Splits(saved) = read_saved_offsets(&state, "files").unwrap() else {
            panic!("splits");
        };
        let got: Vec<(u64, u64, u64)> = saved["in/a.jsonl"]
            .iter()
            .map(|s| (s.start, s.end, s.at.position))
            .collect();
        assert_eq!(got, vec![(0, 100, 0), (100, TO_END, 150)]);
    }

    #[test]
    fn an_earlier_versions_whole_file_positions_are_read() {
        let batch = RecordBatch::try_from_iter(vec![
            (
                "file",
                Arc::new(StringArray::from(vec!["a.csv", "b.csv"])) as _,
            ),
            ("position", Arc::new(UInt64Array::from(vec![7, 0])) as _),
            ("done", Arc::new(BooleanArray::from(vec![false, true])) as _),
        ])
        .unwrap();
        let state = OperatorState::of(vec![batch]);
        let saved = read_saved_offsets(&state, "files").unwrap();
        let at = |position, done| SplitPosition { position, done };
        assert_eq!(
            saved,
            SavedOffsets::Files(
                [
                    ("a.csv".into(), at(7, false)),
                    ("b.csv".into(), at(0, true))
                ]
                .into()
            )
        );
    }
}
