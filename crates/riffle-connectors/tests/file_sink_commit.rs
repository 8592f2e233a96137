//! The file sink's two-phase commit in every format: nothing is visible before commit,
//! commit is idempotent, rows after the last barrier stay staged until aborted, and a
//! lost staged file is an error naming it.

use riffle_connectors::sinks::{FileFormat, FileSinkFactory, RollingPolicy};
use riffle_core::arrow::array::{Int64Array, TimestampNanosecondArray};
use riffle_core::arrow::datatypes::{DataType, Field};
use riffle_core::{
    Committable, Committer, Epoch, RecordBatch, SinkContext, SinkFactory, StreamSchema,
};
use std::path::Path;
use std::sync::Arc;

fn schema() -> StreamSchema {
    StreamSchema::with_timestamp(vec![Field::new("id", DataType::Int64, false)])
}

fn batch(schema: &StreamSchema, ids: std::ops::Range<i64>) -> RecordBatch {
    let ids: Vec<i64> = ids.collect();
    let ts: Vec<i64> = ids.iter().map(|i| i * 1_000).collect();
    RecordBatch::try_new(
        schema.schema.clone(),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(TimestampNanosecondArray::from(ts).with_timezone("UTC")),
        ],
    )
    .unwrap()
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn published(dir: &Path) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter(|n| !n.ends_with(".inprogress"))
        .collect()
}

#[test]
fn staged_output_is_published_only_by_commit_in_every_format() {
    for format in [FileFormat::Jsonl, FileFormat::Csv, FileFormat::Parquet] {
        let dir = tempfile::tempdir().unwrap();
        let factory = FileSinkFactory::new(dir.path(), format, RollingPolicy::default());
        let schema = schema();
        let ctx = SinkContext {
            subtask: 3,
            parallelism: 4,
            exactly_once: true,
            generation: 1,
        };
        let mut sink = factory.create(&schema, &ctx).unwrap();
        let committable = |epoch: u64, payload: String| Committable {
            sink: "sink".into(),
            subtask: 3,
            epoch: Epoch(epoch),
            payload,
        };

        sink.write(&batch(&schema, 0..10)).unwrap();
        let first = committable(7, sink.pre_commit(Epoch(7)).unwrap().expect("rows staged"));
        sink.write(&batch(&schema, 10..20)).unwrap();
        let second = committable(8, sink.pre_commit(Epoch(8)).unwrap().expect("rows staged"));
        assert_eq!(
            sink.pre_commit(Epoch(9)).unwrap(),
            None,
            "{format:?}: an epoch without rows stages nothing"
        );
        sink.write(&batch(&schema, 20..30)).unwrap(); // after the last barrier
        sink.finish().unwrap();
        assert!(
            published(dir.path()).is_empty(),
            "{format:?}: visible before commit: {:?}",
            names(dir.path())
        );

        factory.commit(&first).unwrap();
        factory.commit(&first).unwrap(); // a roll forward repeats it: harmless
        factory.commit(&second).unwrap();
        let ext = format.extension();
        assert_eq!(
            published(dir.path()),
            vec![
                format!("part-003-e000007-000.{ext}"),
                format!("part-003-e000008-000.{ext}")
            ]
        );
        assert_eq!(
            factory.abort_staged(2).unwrap(),
            1,
            "{format:?}: rows after the last barrier"
        );
        assert_eq!(names(dir.path()).len(), 2, "{:?}", names(dir.path()));

        // Every committed file holds its epoch's rows.
        let rows = |name: &str| -> usize {
            let path = dir.path().join(name);
            match format {
                FileFormat::Parquet => {
                    let file = std::fs::File::open(&path).unwrap();
                    riffle_core::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
                        .unwrap()
                        .build()
                        .unwrap()
                        .map(|b| b.unwrap().num_rows())
                        .sum()
                }
                FileFormat::Csv => std::fs::read_to_string(&path).unwrap().lines().count() - 1,
                FileFormat::Jsonl => std::fs::read_to_string(&path).unwrap().lines().count(),
            }
        };
        assert_eq!(rows(&format!("part-003-e000007-000.{ext}")), 10);
        assert_eq!(rows(&format!("part-003-e000008-000.{ext}")), 10);

        // Staged output that is gone without having been published cannot be committed.
        std::fs::remove_file(dir.path().join(format!("part-003-e000007-000.{ext}"))).unwrap();
        let err = factory.commit(&first).unwrap_err().to_string();
        assert!(
            err.contains(".inprogress") && err.contains("never published"),
            "{format:?}: {err}"
        );
    }
}

#[test]
fn without_checkpoints_files_are_published_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let factory = FileSinkFactory::new(dir.path(), FileFormat::Jsonl, RollingPolicy::default());
    let schema = schema();
    let ctx = SinkContext {
        subtask: 0,
        parallelism: 1,
        exactly_once: false,
        generation: 1,
    };
    let mut sink = factory.create(&schema, &ctx).unwrap();
    sink.write(&batch(&schema, 0..5)).unwrap();
    assert_eq!(sink.pre_commit(Epoch(1)).unwrap(), None);
    let summary = sink.finish().unwrap();
    assert_eq!(
        published(dir.path()),
        vec!["part-000-00000.jsonl".to_string()]
    );
    assert_eq!(summary.rows, 5);
}

/// Recovery resumes from epoch 4 past damaged epochs 5 and 6: everything published
/// after epoch 4 is taken back — also `e000005`, staged by a checkpoint that failed and
/// committed with epoch 6 — and nothing of epoch 4 or before, nor staged files.
#[test]
fn unpublish_takes_back_every_file_published_after_the_restored_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let names = [
        "part-000-e000003-000.jsonl",
        "part-001-e000004-000.jsonl",
        "part-000-e000005-000.jsonl",
        "part-001-e000006-001.jsonl",
        "part-000-g2-00004.jsonl.inprogress",
    ];
    for name in names {
        std::fs::write(dir.path().join(name), "{}\n").unwrap();
    }
    let factory = FileSinkFactory::new(dir.path(), FileFormat::Jsonl, RollingPolicy::default());
    assert_eq!(
        factory.unpublish(Epoch(4)).unwrap(),
        riffle_core::Unpublished::Removed(2)
    );
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            "part-000-e000003-000.jsonl",
            "part-000-g2-00004.jsonl.inprogress",
            "part-001-e000004-000.jsonl"
        ]
    );
}

/// A partitioned sink's take-back reaches files at every depth (a partitioning changed
/// between runs leaves other depths), takes back the `_SUCCESS` marks of later epochs
/// with their files, and keeps a mark that is not riffle's; staged files go at every
/// depth too.
#[test]
fn a_partitioned_take_back_reaches_every_depth_and_the_marks_of_later_epochs() {
    use riffle_connectors::sinks::partitions::{Partitioning, DEFAULT_PARTITION_NAME};
    let dir = tempfile::tempdir().unwrap();
    let files = [
        ("part-000-e000003-000.jsonl", "{}\n"),
        ("dt=a/part-000-e000005-000.jsonl", "{}\n"),
        ("dt=a/_SUCCESS", "{\"epoch\":5}"),
        ("dt=b/hm=x/part-000-e000004-000.jsonl", "{}\n"),
        ("dt=b/hm=x/_SUCCESS", "{\"epoch\":4}"),
        ("dt=b/hm=x/.part-001-g3-00002.jsonl.inprogress", "{}\n"),
        ("dt=c/_SUCCESS", ""),
    ];
    for (name, body) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    let factory = FileSinkFactory::new(dir.path(), FileFormat::Jsonl, RollingPolicy::default())
        .partitioned(Partitioning {
            columns: vec!["dt".into()],
            default_name: DEFAULT_PARTITION_NAME.into(),
            commit: None,
        });
    assert_eq!(
        factory.unpublish(Epoch(4)).unwrap(),
        riffle_core::Unpublished::Removed(2)
    );
    assert_eq!(factory.abort_staged(4).unwrap(), 1);
    assert_eq!(factory.published().unwrap(), 2);
    let exists = |name: &str| dir.path().join(name).exists();
    assert!(!exists("dt=a/part-000-e000005-000.jsonl") && !exists("dt=a/_SUCCESS"));
    assert!(exists("part-000-e000003-000.jsonl"));
    assert!(exists("dt=b/hm=x/part-000-e000004-000.jsonl") && exists("dt=b/hm=x/_SUCCESS"));
    assert!(!exists("dt=b/hm=x/.part-001-g3-00002.jsonl.inprogress"));
    assert!(
        exists("dt=c/_SUCCESS"),
        "a mark that is not riffle's was removed"
    );
}
