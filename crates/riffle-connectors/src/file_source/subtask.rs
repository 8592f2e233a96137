//! One subtask of the file source: reads its splits in order, checkpoints how far it
//! read each, and on a restore takes its own splits from the state of all old subtasks.

use super::lines::LineBlocks;
use super::offsets::{
    offsets_state, read_saved_offsets, whole_file, SavedOffsets, SavedSplit, SplitPosition,
};
use super::presence::ColumnPresence;
use super::reader::{Extent, FileReader};
use super::split::{assign, Layout, Split};
use super::{FileSourceConfig, MalformedRecords};
use riffle_core::arrow::datatypes::SchemaRef;
use riffle_core::operator::OperatorCounters;
use riffle_core::{Error, OperatorState, Result, Source, SourcePoll, StreamSchema};
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(super) struct FileSource {
    /// This subtask's splits: `i, i + p, …` of the input's.
    pub splits: Vec<Split>,
    /// Where reading each of `splits` starts (a restore) — or, once read, that it is done.
    pub positions: Vec<SplitPosition>,
    /// The whole input's splits as this run would cut them (before a restore).
    pub plan: Arc<Vec<Split>>,
    /// How every file of the input can be cut, by path.
    pub layouts: Arc<HashMap<PathBuf, Layout>>,
    pub subtask: usize,
    pub parallelism: usize,
    /// With a rate: when this subtask started and the rows it has produced since.
    pub throttle: Option<(std::time::Instant, u64)>,
    pub next_split: usize,
    pub reader: Option<FileReader>,
    pub config: FileSourceConfig,
    pub file_schema: SchemaRef,
    pub event_time_index: usize,
    pub schema: StreamSchema,
    pub counters: Arc<OperatorCounters>,
    pub operator: String,
    /// JSON: which declared columns had a value (shared by the subtasks).
    pub presence: Option<Arc<ColumnPresence>>,
    /// Whether this subtask told `presence` it has read its last split.
    pub reported: bool,
    /// The columns read (ascending), when not all.
    pub read: Option<Vec<usize>>,
    /// A timestamp column and the range outside which Parquet row groups are passed
    /// over (see `SourceFactory::reading_times_within`).
    pub times: Option<(usize, riffle_core::TimeBounds)>,
}

impl Source for FileSource {
    fn poll_next(&mut self) -> Result<SourcePoll> {
        if let Some(rate) = self.config.max_rows_per_second {
            // This subtask's share of the rate; the runtime sleeps between Pending polls.
            let share = (rate as f64 / self.parallelism as f64).max(1.0);
            let (started, produced) = *self
                .throttle
                .get_or_insert_with(|| (std::time::Instant::now(), 0));
            if produced as f64 >= started.elapsed().as_secs_f64() * share {
                return Ok(SourcePoll::Pending);
            }
        }
        let polled = self.read_next()?;
        if let (Some((_, produced)), SourcePoll::Batch(batch)) = (&mut self.throttle, &polled) {
            *produced += batch.num_rows() as u64;
        }
        Ok(polled)
    }

    fn snapshot(&mut self, _epoch: riffle_core::Epoch) -> Result<OperatorState> {
        let splits: Vec<(&Split, SplitPosition)> = self
            .splits
            .iter()
            .zip(&self.positions)
            .enumerate()
            .map(|(i, (split, at))| {
                let mut at = *at;
                if let Some(reader) = self.reader.as_ref().filter(|_| i + 1 == self.next_split) {
                    at.position = reader.position();
                }
                (split, at)
            })
            .collect();
        offsets_state(&splits)
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        let saved = match read_saved_offsets(&state, &self.operator)? {
            SavedOffsets::Splits(saved) => saved,
            SavedOffsets::Files(files) => files
                .into_iter()
                .map(|(path, at)| {
                    let position = self.earlier_position(&path, at)?;
                    Ok((path, whole_file(position, at.done)))
                })
                .collect::<Result<_>>()?,
            SavedOffsets::Single {
                path,
                file,
                position,
            } => self.single_file(&path, file, position)?,
        };
        if let Some(gone) = saved
            .keys()
            .find(|p| !self.layouts.contains_key(Path::new(p)))
        {
            return Err(self.state_error(format!("the checkpoint was reading {gone}, which is no longer in the input; put it back, or start from empty state")));
        }
        let splits = resumed(&self.plan, &saved, &self.layouts);
        let mine = assign(&splits, self.subtask, self.parallelism);
        (self.splits, self.positions) = mine.into_iter().unzip();
        Ok(())
    }
}

/// The whole input's splits after a restore, with where each is to be read from: a
/// file the checkpoint saw keeps its splits as they were cut then (so no line is in
/// two splits); a file new since then is cut as planned now.
fn resumed(
    plan: &[Split],
    saved: &HashMap<String, Vec<SavedSplit>>,
    layouts: &HashMap<PathBuf, Layout>,
) -> Vec<(Split, SplitPosition)> {
    let mut splits = Vec::with_capacity(plan.len());
    for (i, split) in plan.iter().enumerate() {
        let first_of_file = i == 0 || plan[i - 1].path != split.path;
        match saved.get(&split.path.display().to_string()) {
            Some(parts) if first_of_file => {
                splits.extend(parts.iter().map(|part| {
                    let split = Split {
                        path: split.path.clone(),
                        start: part.start,
                        end: part.end,
                    };
                    (split, part.at)
                }));
            }
            Some(_) => {}
            None => {
                let position = layouts
                    .get(&split.path)
                    .map_or(0, |layout| layout.first_position(split));
                let at = SplitPosition {
                    position,
                    done: false,
                };
                splits.push((split.clone(), at));
            }
        }
    }
    splits
}

impl FileSource {
    fn state_error(&self, message: String) -> Error {
        Error::State {
            operator: self.operator.clone(),
            message,
        }
    }

    /// The next batch of the splits, without throttling.
    fn read_next(&mut self) -> Result<SourcePoll> {
        loop {
            if self.reader.is_none() {
                while self.positions.get(self.next_split).is_some_and(|p| p.done) {
                    self.next_split += 1;
                }
                if self.next_split >= self.splits.len() {
                    self.report_absent_columns();
                    return Ok(SourcePoll::End);
                }
                let split = &self.splits[self.next_split];
                let extent = Extent {
                    start: split.start,
                    end: split.end,
                    position: self.positions[self.next_split].position,
                };
                self.reader = Some(FileReader::open(
                    &split.path,
                    self.config.format,
                    self.file_schema.clone(),
                    self.config.batch_rows,
                    extent,
                    self.read.clone(),
                    self.times,
                )?);
                self.next_split += 1;
            }
            let Some(reader) = self.reader.as_mut() else {
                continue;
            };
            let skip = self.config.on_malformed == MalformedRecords::Skip;
            match reader.next_batch(skip, self.event_time_index, &self.schema, &self.counters)? {
                Some(batch) if batch.num_rows() > 0 => {
                    if let Some(presence) = &self.presence {
                        presence.count(&batch);
                    }
                    return Ok(SourcePoll::Batch(batch));
                }
                Some(_) => {}
                None => {
                    self.reader = None;
                    self.positions[self.next_split - 1].done = true;
                }
            }
        }
    }

    /// Once, at the end of this subtask's splits: the last subtask to get there warns of
    /// each declared JSON column that no row read had a value for.
    fn report_absent_columns(&mut self) {
        if std::mem::replace(&mut self.reported, true) {
            return;
        }
        let Some(presence) = &self.presence else {
            return;
        };
        if let Some((absent, rows)) = presence.finish(self.parallelism) {
            for column in absent {
                tracing::warn!(
                    "{}: the declared column `{column}` is NULL in all {rows} rows read; does any record carry the key `{column}`? (JSON keys match exactly, case included)",
                    self.config.path
                );
            }
        }
    }

    /// An earlier version's position in a whole file as this version's: plain text
    /// was positioned by lines read, and is now by the byte offset after them.
    fn earlier_position(&self, path: &str, at: SplitPosition) -> Result<u64> {
        let path = Path::new(path);
        if at.done || at.position == 0 || !matches!(self.layouts.get(path), Some(Layout::Bytes(_)))
        {
            return Ok(at.position);
        }
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let mut lines = LineBlocks::new(file);
        lines
            .skip_lines(at.position)
            .map_err(|e| Error::io(path, e))?;
        Ok(lines.offset())
    }

    /// An older version's offset, written at parallelism 1 (at any other, each old
    /// subtask's is refused as ambiguous): the files before `file` were read, `file`
    /// up to `position`, and the rest not at all.
    fn single_file(
        &self,
        path: &str,
        file: u64,
        position: u64,
    ) -> Result<HashMap<String, Vec<SavedSplit>>> {
        let mut files: Vec<&PathBuf> = self.plan.iter().map(|s| &s.path).collect();
        files.dedup();
        let file = usize::try_from(file).unwrap_or(usize::MAX);
        if file < files.len() && files[file].display().to_string() != path {
            return Err(self.state_error(format!("checkpoint was reading {path}, but file #{file} is now {}; the input directory changed", files[file].display())));
        }
        let mut saved: HashMap<String, Vec<SavedSplit>> = files
            .iter()
            .take(file)
            .map(|f| (f.display().to_string(), whole_file(0, true)))
            .collect();
        if file < files.len() {
            let at = SplitPosition {
                position,
                done: false,
            };
            saved.insert(
                path.to_string(),
                whole_file(self.earlier_position(path, at)?, false),
            );
        }
        Ok(saved)
    }
}

#[cfg(test)]
mod tests {
    use super::super::split::TO_END;
    use super::*;

    fn split(path: &str, start: u64, end: u64) -> Split {
        Split {
            path: path.into(),
            start,
            end,
        }
    }

    #[test]
    fn a_restore_keeps_the_saved_cuts_and_cuts_new_files_afresh() {
        let plan = vec![
            split("a", 0, 50),
            split("a", 50, TO_END),
            split("b", 0, 40),
            split("b", 40, 80),
            split("b", 80, TO_END),
        ];
        let layouts: HashMap<PathBuf, Layout> = [
            ("a".into(), Layout::Bytes(100)),
            ("b".into(), Layout::Bytes(120)),
        ]
        .into();
        let at = |position, done| SplitPosition { position, done };
        // `b` was cut in two then; `a` is new.
        let saved: HashMap<String, Vec<SavedSplit>> = [(
            "b".to_string(),
            vec![
                SavedSplit {
                    start: 0,
                    end: 60,
                    at: at(60, true),
                },
                SavedSplit {
                    start: 60,
                    end: TO_END,
                    at: at(75, false),
                },
            ],
        )]
        .into();
        let got = resumed(&plan, &saved, &layouts);
        assert_eq!(
            got,
            vec![
                (split("a", 0, 50), at(0, false)),
                (split("a", 50, TO_END), at(50, false)),
                (split("b", 0, 60), at(60, true)),
                (split("b", 60, TO_END), at(75, false)),
            ]
        );
    }
}
