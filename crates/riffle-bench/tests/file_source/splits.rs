//! One file read by many subtasks: JSON lines and CSV cut into byte ranges, Parquet
//! between row groups. Every line is read once at any parallelism, a checkpoint's
//! splits restore at another, and an error in a later split names its line counted
//! from the file's start.

use super::*;
use riffle_core::arrow::array::{ArrayRef, BooleanArray, UInt64Array};
use riffle_core::parquet::arrow::ArrowWriter;
use riffle_core::parquet::file::properties::WriterProperties;

/// `format` files of `dir`, cut into splits of `bytes` (row groups of that many bytes).
fn cut_into(dir: &Path, format: FileFormat, bytes: u64) -> FileSourceFactory {
    let mut cfg = config(dir, format, MalformedRecords::Fail);
    cfg.split_bytes = Some(bytes);
    FileSourceFactory::new(cfg).unwrap()
}

/// The ids each of `p` subtasks reads.
fn per_subtask(factory: &FileSourceFactory, p: usize) -> Vec<Vec<i64>> {
    (0..p)
        .map(|s| {
            let ctx = OperatorContext::detached("files", s, p);
            ids(&drain(factory.create(&ctx).unwrap().as_mut()))
        })
        .collect()
}

#[test]
fn one_file_is_read_by_every_subtask_each_line_once() {
    let dir = tempfile::tempdir().unwrap();
    write_jsonl(dir.path(), "big.jsonl", 0, 500);
    for (bytes, p) in [(1000, 1), (1000, 2), (777, 3), (64, 2), (1 << 20, 2)] {
        let parts = per_subtask(&cut_into(dir.path(), FileFormat::Jsonl, bytes), p);
        let mut all: Vec<i64> = parts.concat();
        all.sort();
        assert_eq!(all, (0..500).collect::<Vec<_>>(), "{bytes} bytes, p{p}");
        let idle = parts.iter().filter(|part| part.is_empty()).count();
        assert_eq!(idle, usize::from(bytes > 100_000), "{bytes} bytes, p{p}");
    }
    let (batches, _) = run(cut_into(dir.path(), FileFormat::Jsonl, 1000), 2).unwrap();
    assert_eq!(ids(&batches), (0..500).collect::<Vec<_>>());
}

/// A CSV file's header is its first split's: the other splits begin with records.
#[test]
fn a_csv_file_is_split_below_its_header() {
    let dir = tempfile::tempdir().unwrap();
    let rows: String = (0..300).map(|i| format!("{i},{}\n", 1000 * i)).collect();
    std::fs::write(dir.path().join("v.csv"), format!("id,ts\n{rows}")).unwrap();
    for p in [1, 2, 3] {
        let parts = per_subtask(&cut_into(dir.path(), FileFormat::Csv, 500), p);
        assert!(parts.iter().all(|part| !part.is_empty()), "p{p}");
        let mut all = parts.concat();
        all.sort();
        assert_eq!(all, (0..300).collect::<Vec<_>>(), "p{p}");
    }
}

/// Splits restore as they were cut, even where the new run would cut otherwise; a
/// split read halfway resumes at the line after the last one read.
#[test]
fn split_positions_restore_at_another_parallelism_each_line_once() {
    let dir = tempfile::tempdir().unwrap();
    write_jsonl(dir.path(), "a.jsonl", 0, 400);
    write_jsonl(dir.path(), "b.jsonl", 400, 20);
    let before = cut_into(dir.path(), FileFormat::Jsonl, 1500);
    let after = cut_into(dir.path(), FileFormat::Jsonl, 1100);
    for (old, new) in [(2, 1), (1, 3), (3, 2), (2, 2), (4, 3)] {
        let all = read_across_restore(&before, &after, old, new);
        assert_eq!(all, (0..420).collect::<Vec<_>>(), "p{old} → p{new}");
    }
}

#[test]
fn a_bad_line_in_a_later_split_is_named_by_its_line_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    write_jsonl(dir.path(), "a.jsonl", 0, 300);
    let path = dir.path().join("a.jsonl");
    let mut lines: Vec<String> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lines[249] = "{\"id\": 249, \"ts\": ".into();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let declared = |on_malformed| {
        let mut cfg = id_and_ts(dir.path(), on_malformed);
        cfg.split_bytes = Some(1000);
        FileSourceFactory::new(cfg).unwrap()
    };
    let err = run(declared(MalformedRecords::Fail), 2).expect_err("line 250 is bad");
    match err {
        RuntimeError::Task {
            source: Error::MalformedRecord { file, line, .. },
            ..
        } => {
            assert!(file.ends_with("a.jsonl"));
            assert_eq!(line, 250);
        }
        other => panic!("unexpected error: {other:?}"),
    }
    let (batches, summary) = run(declared(MalformedRecords::Skip), 2).unwrap();
    assert_eq!(ids(&batches).len(), 299);
    assert_eq!(skipped(&summary), 1);
}

/// The offsets of the version before splits: per whole file, the lines read (a CSV
/// header counted) — restored as the byte offset after those lines.
#[test]
fn an_earlier_versions_line_positions_restore() {
    let dir = tempfile::tempdir().unwrap();
    write_jsonl(dir.path(), "a.jsonl", 0, 10);
    let csv_dir = dir.path().join("csv");
    std::fs::create_dir(&csv_dir).unwrap();
    std::fs::write(
        csv_dir.join("v.csv"),
        "id,ts\n0,0\n1,1000\n2,2000\n3,3000\n",
    )
    .unwrap();
    for (dir, format, file, lines, expected) in [
        (dir.path(), FileFormat::Jsonl, "a.jsonl", 4, 4..10),
        (csv_dir.as_path(), FileFormat::Csv, "v.csv", 3, 2..4),
    ] {
        let offsets = RecordBatch::try_from_iter(vec![
            (
                "file",
                Arc::new(StringArray::from(vec![dir
                    .join(file)
                    .display()
                    .to_string()])) as _,
            ),
            ("position", Arc::new(UInt64Array::from(vec![lines])) as _),
            ("done", Arc::new(BooleanArray::from(vec![false])) as _),
        ])
        .unwrap();
        let factory = cut_into(dir, format, 8);
        let mut all = Vec::new();
        for s in 0..2 {
            let mut source = factory
                .create(&OperatorContext::detached("files", s, 2))
                .unwrap();
            let state = riffle_core::OperatorState::of(vec![offsets.clone()]);
            source.restore(state).unwrap();
            all.extend(ids(&drain(source.as_mut())));
        }
        all.sort();
        assert_eq!(all, expected.collect::<Vec<_>>(), "{file}");
    }
}

/// `t.parquet` in `dir`: ids 0–99 and the column `ts`, in row groups of ten rows.
fn write_hundred_rows(dir: &Path, ts: ArrayRef) -> Vec<i64> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("ts", ts.data_type().clone(), false),
    ]));
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(10))
        .build();
    let file = std::fs::File::create(dir.join("t.parquet")).unwrap();
    let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(props)).unwrap();
    let ids: Vec<i64> = (0..100).collect();
    let columns: Vec<ArrayRef> = vec![Arc::new(Int64Array::from(ids.clone())), ts];
    writer
        .write(&RecordBatch::try_new(schema, columns).unwrap())
        .unwrap();
    writer.close().unwrap();
    ids
}

#[test]
fn parquet_is_split_between_row_groups_and_restored() {
    let dir = tempfile::tempdir().unwrap();
    let ids_written = write_hundred_rows(
        dir.path(),
        Arc::new(Int64Array::from_iter_values((0..100).map(|i| i * 1000))),
    );
    // One row group a split: ten splits.
    let factory = cut_into(dir.path(), FileFormat::Parquet, 1);
    let parts = per_subtask(&factory, 3);
    assert_eq!(parts.iter().map(Vec::len).collect::<Vec<_>>(), [40, 30, 30]);
    for (old, new) in [(2, 3), (3, 1)] {
        let all = read_across_restore(&factory, &factory, old, new);
        assert_eq!(all, ids_written, "p{old} → p{new}");
    }
}

/// Restores at `old` → `new` between a factory that prunes by time and one that does
/// not: pruned → pruned reads exactly `kept`. Pruning only after the restore, what was
/// read before stays read once and the rest of the kept rows follow; the other way
/// round, rows passed over before the checkpoint count as read (as rows a filter
/// dropped would). Neither reads a row twice or loses a kept one. Returns what
/// pruned → whole read.
fn check_pruned_restores(
    whole: &FileSourceFactory,
    pruned: &dyn SourceFactory,
    kept: &[i64],
    old: usize,
    new: usize,
) -> Vec<i64> {
    assert_eq!(
        read_across_restore(pruned, pruned, old, new),
        kept,
        "pruned p{old} → p{new}"
    );
    let once_each_and_every_kept = |read: &[i64], what: &str| {
        let mut unique = read.to_vec();
        unique.dedup();
        assert_eq!(unique, read, "no row twice, {what} p{old} → p{new}");
        assert!(kept.iter().all(|id| read.contains(id)), "{what}: {read:?}");
    };
    once_each_and_every_kept(
        &read_across_restore(whole, pruned, old, new),
        "whole → pruned",
    );
    let widened = read_across_restore(pruned, whole, old, new);
    once_each_and_every_kept(&widened, "pruned → whole");
    widened
}

/// A time range passes over Parquet row groups outside it, and positions still count
/// the split's rows: restores at other parallelisms read each kept row once, and a run
/// that prunes after one that did not (or the other way round) repeats no row and
/// loses none of the kept ones.
#[test]
fn parquet_row_groups_outside_a_time_range_are_passed_over_across_restores() {
    use riffle_core::arrow::array::TimestampMillisecondArray;
    use riffle_core::TimeBounds;

    let dir = tempfile::tempdir().unwrap();
    write_hundred_rows(
        dir.path(),
        Arc::new(TimestampMillisecondArray::from_iter_values(
            (0..100).map(|i| i * 1000),
        )),
    );
    // Two row groups a split; the range [25 s, 54.999 s] keeps groups 2–5 (rows 20–59).
    let whole = cut_into(dir.path(), FileFormat::Parquet, 2);
    let bounds = TimeBounds {
        from: Some(25_000_000_000),
        to: Some(54_999_000_000),
    };
    let pruned = whole
        .reading_times_within(1, bounds)
        .expect("a timestamp column");
    assert!(pruned
        .describe()
        .contains("passing over row groups and pages with `ts`"));
    let kept: Vec<i64> = (20..60).collect();
    for (old, new) in [(2, 3), (3, 1), (1, 2)] {
        let widened = check_pruned_restores(&whole, pruned.as_ref(), &kept, old, new);
        assert!(
            widened.contains(&99),
            "the groups after are read: {widened:?}"
        );
    }
}

/// Within a row group, the pages outside a time range are passed over too (by the
/// file's page index), and positions still count every row of the split: restores at
/// other parallelisms, and runs that prune after one that did not (or the other way
/// round), read each kept row once.
#[test]
fn parquet_pages_outside_a_time_range_are_passed_over_across_restores() {
    use riffle_core::arrow::array::TimestampMillisecondArray;
    use riffle_core::TimeBounds;

    let dir = tempfile::tempdir().unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new(
            "ts",
            DataType::Timestamp(riffle_core::arrow::datatypes::TimeUnit::Millisecond, None),
            false,
        ),
    ]));
    // Two row groups of 50 rows, in pages of 5 rows.
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(50))
        .set_data_page_row_count_limit(5)
        .set_write_batch_size(5)
        .build();
    let file = std::fs::File::create(dir.path().join("t.parquet")).unwrap();
    let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(props)).unwrap();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(0..100)),
        Arc::new(TimestampMillisecondArray::from_iter_values(
            (0..100).map(|i| i * 1000),
        )),
    ];
    writer
        .write(&RecordBatch::try_new(schema, columns).unwrap())
        .unwrap();
    writer.close().unwrap();

    // One row group a split; the range [27 s, 52.999 s] overlaps both groups, and the
    // pages of rows 25–54.
    let whole = cut_into(dir.path(), FileFormat::Parquet, 1);
    let bounds = TimeBounds {
        from: Some(27_000_000_000),
        to: Some(52_999_000_000),
    };
    let pruned = whole
        .reading_times_within(1, bounds)
        .expect("a timestamp column");
    let kept: Vec<i64> = (25..55).collect();
    for (old, new) in [(1, 1), (2, 1), (1, 2), (2, 2), (2, 3)] {
        let widened = check_pruned_restores(&whole, pruned.as_ref(), &kept, old, new);
        // At p1 the second split was not begun before the checkpoint: read whole after.
        // (At p2 it was read to its end, pages passed over counting as read.)
        if old == 1 {
            assert!(
                (50..100).all(|id| widened.contains(&id)),
                "pruned p1 → whole p{new}: {widened:?}"
            );
        }
    }
}
