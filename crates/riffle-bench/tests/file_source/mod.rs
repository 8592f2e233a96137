//! The file source end to end: formats, ordering, parallel splits, malformed records
//! (named or skipped and counted), and replay from an offset.

use riffle_connectors::sinks::{CollectSinkFactory, FileFormat, FileSinkFactory, RollingPolicy};
use riffle_connectors::{FileSourceConfig, FileSourceFactory, MalformedRecords};
use riffle_core::arrow::array::{AsArray, Int64Array, StringArray, TimestampNanosecondArray};
use riffle_core::arrow::datatypes::{DataType, Field, Int64Type, Schema};
use riffle_core::{
    Error, OperatorContext, RecordBatch, Source, SourceFactory, SourcePoll, StreamSchema,
};
use riffle_runtime::job::{self, JobConfig};
use riffle_runtime::{JobGraph, JobSummary, RuntimeError, WatermarkStrategy};
use std::path::Path;
use std::sync::Arc;

mod duckdb_reader;
mod splits;
mod strict_json;

fn config(path: &Path, format: FileFormat, on_malformed: MalformedRecords) -> FileSourceConfig {
    FileSourceConfig {
        path: path.display().to_string(),
        format,
        schema: None,
        event_time_column: "ts".into(),
        on_malformed,
        batch_rows: 3,
        max_rows_per_second: None,
        split_bytes: None,
    }
}

/// The JSON-lines files of `dir`, failing on a malformed record.
fn jsonl_source(dir: &Path) -> FileSourceFactory {
    FileSourceFactory::new(config(dir, FileFormat::Jsonl, MalformedRecords::Fail)).unwrap()
}

/// JSON lines of `dir` with the columns `id BIGINT, ts VARCHAR` declared.
fn id_and_ts(dir: &Path, on_malformed: MalformedRecords) -> FileSourceConfig {
    let mut cfg = config(dir, FileFormat::Jsonl, on_malformed);
    cfg.schema = Some(Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("ts", DataType::Utf8, true),
    ])));
    cfg
}

fn skipped(summary: &JobSummary) -> u64 {
    summary.operators.iter().map(|o| o.records_skipped).sum()
}

/// Every batch a source subtask has left.
fn drain(s: &mut dyn Source) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    while let SourcePoll::Batch(b) = s.poll_next().unwrap() {
        out.push(b);
    }
    out
}

fn run(
    factory: FileSourceFactory,
    parallelism: usize,
) -> Result<(Vec<RecordBatch>, JobSummary), RuntimeError> {
    let mut g = JobGraph::new("files");
    let src = g.source(
        "files",
        Arc::new(factory),
        parallelism,
        WatermarkStrategy::default(),
    )?;
    let sink = CollectSinkFactory::new();
    g.sink("sink", Arc::new(sink.clone()), parallelism, src)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let summary = rt.block_on(job::run(&g, &JobConfig::default()))?;
    Ok((sink.batches(), summary))
}

fn ids(batches: &[RecordBatch]) -> Vec<i64> {
    let mut v: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            b.column_by_name("id")
                .unwrap()
                .as_primitive::<Int64Type>()
                .values()
                .to_vec()
        })
        .collect();
    v.sort();
    v
}

fn write_jsonl(dir: &Path, name: &str, first_id: i64, rows: usize) {
    let text: String = (0..rows as i64)
        .map(|i| {
            format!(
                "{{\"id\": {}, \"name\": \"n{}\", \"ts\": \"2025-01-01T00:00:{:02}Z\"}}\n",
                first_id + i,
                first_id + i,
                i % 60
            )
        })
        .collect();
    std::fs::write(dir.join(name), text).unwrap();
}

#[test]
fn jsonl_directory_is_read_completely_at_any_parallelism() {
    let dir = tempfile::tempdir().unwrap();
    write_jsonl(dir.path(), "a.jsonl", 0, 10);
    write_jsonl(dir.path(), "b.jsonl", 10, 7);
    write_jsonl(dir.path(), "c.jsonl", 17, 5);
    for p in [1, 2] {
        let factory = jsonl_source(dir.path());
        assert_eq!(factory.files().len(), 3);
        let (batches, _) = run(factory, p).unwrap();
        assert_eq!(ids(&batches), (0..22).collect::<Vec<_>>(), "p{p}");
        let ts = batches[0]
            .column_by_name("_timestamp")
            .unwrap()
            .as_primitive::<riffle_core::arrow::datatypes::TimestampNanosecondType>();
        assert!(ts.value(0) >= 1_735_689_600_000_000_000);
    }
}

#[test]
fn malformed_json_names_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    write_jsonl(dir.path(), "a.jsonl", 0, 4);
    let mut text = std::fs::read_to_string(dir.path().join("a.jsonl")).unwrap();
    text.push_str("{\"id\": \"forty\", \"name\": \"x\", \"ts\": \"2025-01-01T00:00:05Z\"}\n");
    std::fs::write(dir.path().join("a.jsonl"), text).unwrap();
    // With the schema declared (inference would type `id` as a string from the bad row).
    let mut cfg = config(dir.path(), FileFormat::Jsonl, MalformedRecords::Fail);
    cfg.schema = Some(Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("ts", DataType::Utf8, false),
    ])));
    let err =
        run(FileSourceFactory::new(cfg).unwrap(), 1).expect_err("a bad record must fail the job");
    match err {
        RuntimeError::Task {
            source: Error::MalformedRecord {
                file, line, field, ..
            },
            ..
        } => {
            assert!(file.ends_with("a.jsonl"));
            assert_eq!(line, 5);
            assert_eq!(field.as_deref(), Some("id"));
        }
        other => panic!("unexpected error: {other:?}"),
    }
}

#[test]
fn malformed_records_can_be_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let text = "{\"id\": 1, \"ts\": \"2025-01-01T00:00:01Z\"}\nnot json at all\n{\"id\": 2, \"ts\": \"yesterday\"}\n{\"id\": 3, \"ts\": \"2025-01-01T00:00:03Z\"}\n";
    std::fs::write(dir.path().join("a.jsonl"), text).unwrap();
    let mut cfg = id_and_ts(dir.path(), MalformedRecords::Skip);
    let (batches, summary) = run(FileSourceFactory::new(cfg.clone()).unwrap(), 1).unwrap();
    assert_eq!(ids(&batches), vec![1, 3]);
    assert_eq!(
        skipped(&summary),
        2,
        "the unparseable line and the bad event time"
    );
    // The same file without skipping fails at line 2.
    cfg.on_malformed = MalformedRecords::Fail;
    let err = run(FileSourceFactory::new(cfg).unwrap(), 1).expect_err("must fail");
    assert!(err.to_string().contains("line 2"), "{err}");
}

#[test]
fn a_line_holding_two_records_is_malformed_not_half_read() {
    let dir = tempfile::tempdir().unwrap();
    // Blank lines count as lines (an error names the line in the file) but hold no record.
    let text = "{\"id\": 1, \"ts\": \"2025-01-01T00:00:01Z\"}\n\n  \n{\"id\": 2, \"ts\": \"2025-01-01T00:00:02Z\"} {\"id\": 9, \"ts\": \"2025-01-01T00:00:02Z\"}\n{\"id\": 3, \"ts\": \"2025-01-01T00:00:03Z\"}\n";
    std::fs::write(dir.path().join("a.jsonl"), text).unwrap();
    let mut cfg = id_and_ts(dir.path(), MalformedRecords::Fail);
    let err = run(FileSourceFactory::new(cfg.clone()).unwrap(), 1).expect_err("must fail");
    match &err {
        RuntimeError::Task {
            source: Error::MalformedRecord { line, .. },
            ..
        } => assert_eq!(*line, 4),
        other => panic!("not a malformed record naming the line: {other:?}"),
    }
    cfg.on_malformed = MalformedRecords::Skip;
    let (batches, summary) = run(FileSourceFactory::new(cfg).unwrap(), 1).unwrap();
    assert_eq!(ids(&batches), vec![1, 3]);
    assert_eq!(skipped(&summary), 1);
}

#[test]
fn a_line_that_is_not_utf8_is_a_malformed_record_named_or_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = b"{\"id\": 1, \"ts\": \"2025-01-01T00:00:01Z\"}\n".to_vec();
    bytes.extend_from_slice(
        b"{\"id\": 2, \"ts\": \"2025-01-01T00:00:02Z\", \"note\": \"caf\xe9\"}\n",
    );
    bytes.extend_from_slice(b"{\"id\": 3, \"ts\": \"2025-01-01T00:00:03Z\"}\n");
    std::fs::write(dir.path().join("latin1.jsonl"), bytes).unwrap();
    let mut cfg = id_and_ts(dir.path(), MalformedRecords::Fail);
    let err = run(FileSourceFactory::new(cfg.clone()).unwrap(), 1).expect_err("must fail");
    match &err {
        RuntimeError::Task {
            source:
                Error::MalformedRecord {
                    file,
                    line,
                    message,
                    ..
                },
            ..
        } => {
            assert!(file.ends_with("latin1.jsonl"));
            assert_eq!(*line, 2);
            assert!(message.contains("not valid UTF-8 (byte 53"), "{message}");
        }
        other => panic!("not a malformed record naming the line: {other:?}"),
    }
    cfg.on_malformed = MalformedRecords::Skip;
    let (batches, summary) = run(FileSourceFactory::new(cfg).unwrap(), 1).unwrap();
    assert_eq!(ids(&batches), vec![1, 3]);
    assert_eq!(skipped(&summary), 1);
}

#[test]
fn csv_with_epoch_millis_and_bad_event_time() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.csv"),
        "id,price,ts\n1,10,1735689600000\n2,20,1735689601000\n3,30,\n",
    )
    .unwrap();
    let factory =
        FileSourceFactory::new(config(dir.path(), FileFormat::Csv, MalformedRecords::Fail))
            .unwrap();
    let err = run(factory, 1).expect_err("a missing event time must fail");
    let text = err.to_string();
    assert!(
        text.contains("a.csv") && text.contains("line 4") && text.contains("`ts`"),
        "{text}"
    );
    std::fs::write(
        dir.path().join("a.csv"),
        "id,price,ts\n1,10,1735689600000\n2,20,1735689601000\n",
    )
    .unwrap();
    let factory =
        FileSourceFactory::new(config(dir.path(), FileFormat::Csv, MalformedRecords::Fail))
            .unwrap();
    let (batches, _) = run(factory, 1).unwrap();
    assert_eq!(ids(&batches), vec![1, 2]);
    let ts = batches[0]
        .column_by_name("_timestamp")
        .unwrap()
        .as_primitive::<riffle_core::arrow::datatypes::TimestampNanosecondType>();
    assert_eq!(ts.value(0), 1_735_689_600_000 * 1_000_000);
}

#[test]
fn parquet_written_by_the_file_sink_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let schema = StreamSchema::with_timestamp(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("ts", riffle_core::timestamp_type(), false),
    ]);
    let sink = FileSinkFactory::new(
        dir.path(),
        FileFormat::Parquet,
        RollingPolicy {
            max_file_bytes: 1,
            max_file_age: None,
        },
    );
    let mut writer = riffle_core::SinkFactory::create(
        &sink,
        &schema,
        &riffle_core::SinkContext {
            subtask: 0,
            parallelism: 1,
            exactly_once: false,
            generation: 1,
        },
    )
    .unwrap();
    for chunk in 0..3i64 {
        let ids: Vec<i64> = (chunk * 4..chunk * 4 + 4).collect();
        let times: Vec<i64> = ids.iter().map(|i| i * 1_000_000_000).collect();
        let batch = RecordBatch::try_new(
            schema.schema.clone(),
            vec![
                Arc::new(Int64Array::from(ids.clone())),
                Arc::new(StringArray::from(
                    ids.iter().map(|i| format!("n{i}")).collect::<Vec<_>>(),
                )),
                Arc::new(TimestampNanosecondArray::from(times.clone()).with_timezone("UTC")),
                Arc::new(TimestampNanosecondArray::from(times).with_timezone("UTC")),
            ],
        )
        .unwrap();
        writer.write(&batch).unwrap();
    }
    let summary = writer.finish().unwrap();
    assert_eq!(
        summary.files.len(),
        3,
        "max_file_bytes = 1 rolls after every batch"
    );
    assert!(std::fs::read_dir(dir.path()).unwrap().all(|e| !e
        .unwrap()
        .path()
        .display()
        .to_string()
        .ends_with(".inprogress")));
    let factory = FileSourceFactory::new(config(
        dir.path(),
        FileFormat::Parquet,
        MalformedRecords::Fail,
    ))
    .unwrap();
    let (batches, _) = run(factory, 2).unwrap();
    assert_eq!(ids(&batches), (0..12).collect::<Vec<_>>());
}

#[test]
fn a_restored_source_replays_from_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    write_jsonl(dir.path(), "a.jsonl", 0, 8);
    write_jsonl(dir.path(), "b.jsonl", 8, 8);
    let factory = jsonl_source(dir.path());
    let ctx = OperatorContext::detached("files", 0, 1);
    let mut a = factory.create(&ctx).unwrap();
    let first = [a.poll_next().unwrap(), a.poll_next().unwrap()];
    assert!(first.iter().all(|p| matches!(p, SourcePoll::Batch(_))));
    let offset = a.snapshot(riffle_core::Epoch(1)).unwrap();
    let rest = drain(a.as_mut());
    let mut b = factory.create(&ctx).unwrap();
    b.restore(offset).unwrap();
    let replayed = drain(b.as_mut());
    assert_eq!(ids(&rest), ids(&replayed));
    assert_eq!(ids(&replayed), (6..16).collect::<Vec<_>>());
}

/// Each old subtask reads `s + 2` batches, then a checkpoint; the new subtasks restore
/// it. Returns the ids read before and after, sorted together.
fn read_across_restore(
    before: &dyn SourceFactory,
    after: &dyn SourceFactory,
    old: usize,
    new: usize,
) -> Vec<i64> {
    let mut read_before = Vec::new();
    let mut offsets = Vec::new();
    for s in 0..old {
        let ctx = OperatorContext::detached("files", s, old);
        let mut source = before.create(&ctx).unwrap();
        for _ in 0..(s + 2) {
            if let SourcePoll::Batch(b) = source.poll_next().unwrap() {
                read_before.push(b);
            }
        }
        offsets.extend(source.snapshot(riffle_core::Epoch(1)).unwrap().batches);
    }
    let mut all = ids(&read_before);
    for s in 0..new {
        let ctx = OperatorContext::detached("files", s, new);
        let mut source = after.create(&ctx).unwrap();
        let state = riffle_core::OperatorState::of(offsets.clone());
        source.restore(state).unwrap();
        all.extend(ids(&drain(source.as_mut())));
    }
    all.sort();
    all
}

/// A checkpoint taken at one parallelism restores at another: every new subtask is
/// given all old subtasks' offsets and reads the rest of its own files, so together
/// they read every row not read before the checkpoint exactly once.
#[test]
fn a_checkpoint_restores_at_another_parallelism_reading_each_row_once() {
    let dir = tempfile::tempdir().unwrap();
    for f in 0..5 {
        write_jsonl(dir.path(), &format!("{f}.jsonl"), f * 8, 8);
    }
    let factory = jsonl_source(dir.path());
    for (old, new) in [(2usize, 1usize), (2, 3), (1, 4), (3, 2)] {
        let all = read_across_restore(&factory, &factory, old, new);
        assert_eq!(all, (0..40).collect::<Vec<_>>(), "p{old} → p{new}");
    }
}

/// A file added to the input before a restart at the same parallelism moves the files
/// sorted after it to other subtasks. Each subtask is therefore given every old
/// subtask's positions (not only its own): given only its own, a subtask took a moved
/// file for a new one and read it again from its start.
#[test]
fn a_file_added_before_a_restart_moves_no_file_to_be_read_twice() {
    let dir = tempfile::tempdir().unwrap();
    write_jsonl(dir.path(), "b.jsonl", 0, 9);
    write_jsonl(dir.path(), "c.jsonl", 100, 9);
    let factory = jsonl_source(dir.path());
    // Both subtasks read one batch (3 rows) of their file, then the checkpoint.
    let mut read_before = Vec::new();
    let mut subtasks = std::collections::HashMap::new();
    for s in 0..2 {
        let mut source = factory
            .create(&OperatorContext::detached("files", s, 2))
            .unwrap();
        if let SourcePoll::Batch(b) = source.poll_next().unwrap() {
            read_before.push(b);
        }
        subtasks.insert(s, source.snapshot(riffle_core::Epoch(1)).unwrap().into());
    }
    let restored = riffle_runtime::restore::RestoredJob {
        epoch: riffle_core::Epoch(1),
        operators: [(
            riffle_core::OperatorId("files".into()),
            riffle_runtime::restore::RestoredOperator {
                parallelism: 2,
                max_parallelism: riffle_core::DEFAULT_MAX_PARALLELISM,
                subtasks,
                read: None,
                watermarks: Default::default(),
            },
        )]
        .into(),
        counters: Default::default(),
        chains: None,
        bytes: (0, 0),
    };
    // `a` sorts first: subtask 0 now reads a and c, subtask 1 reads b.
    write_jsonl(dir.path(), "a.jsonl", 200, 4);
    let factory = jsonl_source(dir.path());
    let mut g = JobGraph::new("files");
    let src = g
        .source("files", Arc::new(factory), 2, WatermarkStrategy::default())
        .unwrap();
    let sink = CollectSinkFactory::new();
    g.sink("sink", Arc::new(sink.clone()), 2, src).unwrap();
    let config = JobConfig {
        restore: Some(Arc::new(restored)),
        ..JobConfig::default()
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(job::run(&g, &config))
        .unwrap();
    let mut all = ids(&read_before);
    all.extend(ids(&sink.batches()));
    all.sort();
    let expected: Vec<i64> = (0..9).chain(100..109).chain(200..204).collect();
    assert_eq!(all, expected);
}

/// `.gz` and `.zst` files (JSON lines and CSV) are decoded as streams: read at any
/// parallelism, restored from a position inside them, and a damaged one fails naming
/// the file.
#[test]
fn compressed_files_are_read_restored_and_named_when_damaged() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let json = |first: i64| -> String {
        (first..first + 10)
            .map(|i| {
                format!(
                    "{{\"id\": {i}, \"ts\": \"2025-01-01T00:00:{:02}Z\"}}\n",
                    i % 60
                )
            })
            .collect()
    };
    let gzip = |text: &str| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap()
    };
    std::fs::write(dir.path().join("a.jsonl.gz"), gzip(&json(0))).unwrap();
    std::fs::write(
        dir.path().join("b.json.zst"),
        zstd::encode_all(json(10).as_bytes(), 3).unwrap(),
    )
    .unwrap();
    write_jsonl(dir.path(), "c.jsonl", 20, 10);
    for p in [1, 2] {
        let (batches, _) = run(jsonl_source(dir.path()), p).unwrap();
        assert_eq!(ids(&batches), (0..30).collect::<Vec<_>>(), "p{p}");
    }
    // A restore decompresses from the start and skips what was read.
    let ctx = OperatorContext::detached("files", 0, 1);
    let mut first = jsonl_source(dir.path()).create(&ctx).unwrap();
    let mut before = Vec::new();
    for _ in 0..5 {
        if let SourcePoll::Batch(b) = first.poll_next().unwrap() {
            before.push(b);
        }
    }
    let offset = first.snapshot(riffle_core::Epoch(1)).unwrap();
    let mut again = jsonl_source(dir.path()).create(&ctx).unwrap();
    again.restore(offset).unwrap();
    let mut all = ids(&before);
    all.extend(ids(&drain(again.as_mut())));
    all.sort();
    assert_eq!(all, (0..30).collect::<Vec<_>>());
    // CSV too.
    let csv_dir = dir.path().join("csv");
    std::fs::create_dir(&csv_dir).unwrap();
    std::fs::write(csv_dir.join("v.csv.gz"), gzip("id,ts\n1,1000\n2,2000\n")).unwrap();
    let (batches, _) = run(
        FileSourceFactory::new(config(&csv_dir, FileFormat::Csv, MalformedRecords::Fail)).unwrap(),
        1,
    )
    .unwrap();
    assert_eq!(ids(&batches), vec![1, 2]);
    // A gzip file cut short fails naming it.
    let whole = gzip(&json(40));
    std::fs::write(dir.path().join("d.jsonl.gz"), &whole[..whole.len() / 2]).unwrap();
    let err = run(jsonl_source(dir.path()), 1).expect_err("a damaged file must fail");
    assert!(err.to_string().contains("d.jsonl.gz"), "{err}");
}

#[test]
fn a_path_without_files_is_a_clear_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = FileSourceFactory::new(config(
        &dir.path().join("nothing-*.jsonl"),
        FileFormat::Jsonl,
        MalformedRecords::Fail,
    ))
    .unwrap_err();
    assert!(err.to_string().contains("no jsonl files"), "{err}");
    write_jsonl(dir.path(), "a.jsonl", 0, 2);
    let mut cfg = config(dir.path(), FileFormat::Jsonl, MalformedRecords::Fail);
    cfg.event_time_column = "when".into();
    let err = FileSourceFactory::new(cfg).unwrap_err();
    assert!(err.to_string().contains("no column `when`"), "{err}");
}
