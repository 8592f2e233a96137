//! Incremental checkpoints by file reuse: which state files of the last committed epoch
//! a new snapshot of a stable-state operator can reference instead of rewriting.

use riffle_core::RecordBatch;
use riffle_state::manifest::FileEntry;
use std::collections::HashMap;

/// State files that hold exactly some snapshot batches, per (operator, subtask).
/// Holding the batches keeps their memory alive, so an array pointer seen again in a
/// later snapshot is the same, unchanged array, never a new one at a freed address.
pub(crate) type ReuseCache = HashMap<(String, usize), Vec<(FileEntry, Vec<RecordBatch>)>>;

/// A batch's identity: where its first column's values live, and its extent.
fn batch_identity(batch: &RecordBatch) -> Option<(usize, usize, usize)> {
    let data = batch.columns().first()?.to_data();
    let buffer = data.buffers().first()?;
    Some((buffer.as_ptr() as usize, data.offset(), batch.num_rows()))
}

/// Splits a stable-state snapshot into files of the previous epoch whose batches are all
/// still present (reused as they are) and the batches that need writing.
pub(crate) fn reuse_files(
    previous: &[(FileEntry, Vec<RecordBatch>)],
    state: riffle_core::OperatorState,
) -> (
    Vec<(FileEntry, Vec<RecordBatch>)>,
    riffle_core::OperatorState,
) {
    let ids: HashMap<(usize, usize, usize), usize> = state
        .batches
        .iter()
        .enumerate()
        .filter_map(|(i, b)| Some((batch_identity(b)?, i)))
        .collect();
    let mut covered = vec![false; state.batches.len()];
    let mut reused = Vec::new();
    for (entry, batches) in previous {
        let positions: Option<Vec<usize>> = batches
            .iter()
            .map(|b| {
                let i = *ids.get(&batch_identity(b)?)?;
                (!covered[i]).then_some(i)
            })
            .collect();
        if let Some(positions) = positions.filter(|p| !p.is_empty()) {
            for i in positions {
                covered[i] = true;
            }
            reused.push((entry.clone(), batches.clone()));
        }
    }
    let fresh = state
        .batches
        .into_iter()
        .zip(covered)
        .filter_map(|(b, c)| (!c).then_some(b))
        .collect();
    (reused, riffle_core::OperatorState { batches: fresh })
}
