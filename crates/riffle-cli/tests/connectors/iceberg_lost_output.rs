//! An Iceberg table whose catalog lost epochs riffle's checkpoints record as committed:
//! restored from an older backup, or deleted. Before, the rerun deleted the data files
//! of those epochs as "staged by uncommitted epochs", or made a new empty table, and
//! exited 0 with the rows gone. Now recovery refuses, naming the epochs, and deletes
//! nothing (docs/engine.md, "Output a sink lost").

use super::super::lost_output::refused_for_lost_output;
use super::*;

#[test]
fn an_iceberg_catalog_restored_from_a_backup_or_deleted_is_refused_and_no_data_file_is_deleted() {
    let lake = Lake::new();
    let file = lake.bids_pipeline("lost", "bids_lost", "300K");
    let state = lake.state("lost");
    let catalog = lake.catalog_file();
    let backup = catalog.with_extension("backup");
    // Epochs 1 and 2 committed; the catalog is backed up; epochs 3..=5 commit more.
    crash(&mut lake.run(&file, &state, 2), "after-latest-flip:2");
    std::fs::copy(&catalog, &backup).unwrap();
    let at_backup = lake.read("bids_lost");
    crash(&mut lake.run(&file, &state, 2), "after-latest-flip:5");
    let before = lake.read("bids_lost");
    assert!(before.rows.len() > at_backup.rows.len());

    // The catalog as it was at the backup: epochs 3..=5 are gone from the table.
    std::fs::copy(&backup, &catalog).unwrap();
    let text = refused_for_lost_output(&mut lake.run(&file, &state, 1));
    assert!(
        text.contains("nexmark.bids_lost") && text.contains("epoch(s) 3, 4, 5,"),
        "{text}"
    );
    let after = lake.read("bids_lost");
    assert_eq!(
        after.rows, at_backup.rows,
        "the refused run changed the table"
    );
    assert_eq!(
        after.stored, before.stored,
        "data files of committed epochs were deleted"
    );

    // The catalog deleted: no new empty table is made, nothing is deleted.
    std::fs::remove_file(&catalog).unwrap();
    refused_for_lost_output(&mut lake.run(&file, &state, 2));
    std::fs::copy(&backup, &catalog).unwrap();
    assert_eq!(lake.read("bids_lost").stored, before.stored);
}
