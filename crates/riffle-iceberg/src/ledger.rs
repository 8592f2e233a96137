//! Which epochs a sink has already committed to a table, read from the table itself:
//! every snapshot riffle commits carries, in its summary, the sink's id and the epochs
//! it holds. Before each commit attempt, and when recovery rolls a PREPARED epoch
//! forward, the committer walks the current snapshot's ancestry and skips epochs found
//! there — so a commit whose answer was lost, or a crash between the catalog commit and
//! the checkpoint's COMMITTED record, never appends an epoch twice. Snapshots of other
//! writers (compaction, other jobs) in the ancestry carry no such keys and are passed
//! over.

use riffle_core::Committable;
use std::collections::{BTreeSet, HashMap};

/// Summary key: the sink's id, stable across runs of one pipeline.
pub const SINK_ID: &str = "riffle.sink-id";
/// Summary key: the epochs the snapshot holds, comma-separated ascending.
pub const EPOCHS: &str = "riffle.epochs";

/// The epochs of `sink_id` in `summaries` (the ancestry's snapshot summaries, any
/// order).
pub fn committed_epochs<'a>(
    summaries: impl IntoIterator<Item = &'a HashMap<String, String>>,
    sink_id: &str,
) -> BTreeSet<u64> {
    summaries
        .into_iter()
        .filter(|s| s.get(SINK_ID).is_some_and(|id| id == sink_id))
        .filter_map(|s| s.get(EPOCHS))
        .flat_map(|epochs| parse_epochs(epochs))
        .collect()
}

/// `"3,4"` → {3, 4}; parts that are not numbers are passed over.
fn parse_epochs(text: &str) -> impl Iterator<Item = u64> + '_ {
    text.split(',').filter_map(|e| e.trim().parse().ok())
}

/// The summary value of `epochs`.
pub fn format_epochs(epochs: &BTreeSet<u64>) -> String {
    epochs
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The committables of `committables` whose epoch is not in `committed`.
pub fn uncommitted<'a>(
    committables: &'a [&'a Committable],
    committed: &BTreeSet<u64>,
) -> Vec<&'a Committable> {
    committables
        .iter()
        .copied()
        .filter(|c| !committed.contains(&c.epoch.0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::Epoch;

    fn summary(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn committable(epoch: u64, subtask: usize) -> Committable {
        Committable {
            sink: "sink".into(),
            subtask,
            epoch: Epoch(epoch),
            payload: "{}".into(),
        }
    }

    #[test]
    fn epochs_of_this_sink_are_found_among_other_writers_snapshots() {
        let ancestry = [
            summary(&[(SINK_ID, "job/t"), (EPOCHS, "5")]),
            summary(&[("operation", "replace")]), // compaction by another writer
            summary(&[(SINK_ID, "other/t"), (EPOCHS, "6")]),
            summary(&[(SINK_ID, "job/t"), (EPOCHS, "2,3")]),
        ];
        assert_eq!(
            committed_epochs(&ancestry, "job/t"),
            BTreeSet::from([2, 3, 5])
        );
        assert_eq!(committed_epochs(&ancestry, "new/t"), BTreeSet::new());
    }

    #[test]
    fn committed_epochs_are_skipped_and_the_rest_kept() {
        let all = [committable(3, 0), committable(3, 1), committable(4, 0)];
        let refs: Vec<&Committable> = all.iter().collect();
        let left = uncommitted(&refs, &BTreeSet::from([3]));
        assert_eq!(left, vec![&all[2]]);
        assert_eq!(uncommitted(&refs, &BTreeSet::from([3, 4])).len(), 0);
        assert_eq!(format_epochs(&BTreeSet::from([4, 3])), "3,4");
        assert_eq!(parse_epochs("3,x,4").collect::<Vec<_>>(), vec![3, 4]);
    }
}
