//! The checkpoint store on a real local directory, a real S3-protocol server (moto on
//! 127.0.0.1) and in memory: round trips, the conditional create that makes PREPARED the
//! commit decision, idempotent commit, partial epochs, and each kind of damage reported
//! with the file it is in.

#[path = "support/moto.rs"]
mod moto;

use riffle_core::arrow::array::{Int64Array, StringArray, UInt16Array};
use riffle_core::arrow::datatypes::{DataType, Field, Schema};
use riffle_core::{Epoch, OperatorState, RecordBatch};
use riffle_state::manifest::{OperatorEntry, SubtaskEntry};
use riffle_state::recovery::{plan_recovery, EpochFinding};
use riffle_state::{CheckpointStore, Manifest, ManifestStatus, StateError, StateRoot};
use std::sync::Arc;

fn state(rows: i64) -> OperatorState {
    let a = Arc::new(Schema::new(vec![
        Field::new("_key_group", DataType::UInt16, false),
        Field::new("k", DataType::Int64, false),
        Field::new("label", DataType::Utf8, false),
    ]));
    let b = Arc::new(Schema::new(vec![
        Field::new("_key_group", DataType::UInt16, false),
        Field::new("next", DataType::Int64, false),
    ]));
    let batch_a = RecordBatch::try_new(
        a,
        vec![
            Arc::new(UInt16Array::from(
                (0..rows).map(|i| (i % 128) as u16).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from((0..rows).collect::<Vec<_>>())),
            Arc::new(StringArray::from(
                (0..rows).map(|i| format!("row {i}")).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap();
    let batch_b = RecordBatch::try_new(
        b,
        vec![
            Arc::new(UInt16Array::from(vec![0u16])),
            Arc::new(Int64Array::from(vec![rows])),
        ],
    )
    .unwrap();
    OperatorState::of(vec![batch_a, batch_b])
}

async fn write_epoch(store: &CheckpointStore, epoch: u64) -> Manifest {
    let epoch = Epoch(epoch);
    let written = store
        .write_state(epoch, 1, "window", 0, &state(1000))
        .await
        .unwrap();
    assert_eq!(written.len(), 2, "one file per state schema");
    let files: Vec<_> = written.into_iter().flat_map(|w| w.files).collect();
    let mut manifest = Manifest::prepared("p", 1, epoch, 0);
    manifest.operators.push(OperatorEntry {
        operator: "window".into(),
        parallelism: 1,
        max_parallelism: 128,
        subtasks: vec![SubtaskEntry {
            subtask: 0,
            files,
            watermark: None,
        }],
        description: None,
        output_schema: None,
    });
    store.prepare(&manifest).await.unwrap();
    manifest
}

/// A state of `held` rows in memory, then `streamed` rows of the same schema from a
/// source, 500 rows a batch, that counts the batches it gave.
fn state_with_streamed_part(
    held: i64,
    streamed: i64,
    given: Arc<std::sync::atomic::AtomicUsize>,
) -> OperatorState {
    let mut state = state(held);
    state.batches.truncate(1);
    let schema = state.batches[0].schema();
    let of = schema.clone();
    let rows = move |from: i64, to: i64| {
        RecordBatch::try_new(
            of.clone(),
            vec![
                Arc::new(UInt16Array::from(
                    (from..to).map(|i| (i % 128) as u16).collect::<Vec<_>>(),
                )),
                Arc::new(Int64Array::from((from..to).collect::<Vec<_>>())),
                Arc::new(StringArray::from(
                    (from..to).map(|i| format!("row {i}")).collect::<Vec<_>>(),
                )),
            ],
        )
        .map_err(riffle_core::Error::from)
    };
    let source = (held..held + streamed).step_by(500).map(move |from| {
        given.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        rows(from, (from + 500).min(held + streamed))
    });
    let part = riffle_core::StreamedBatches::new(schema, Box::new(source));
    state.batches.push(part.placeholder().clone());
    state.streamed.push(part);
    state
}

#[test]
fn a_streamed_part_is_written_as_files_of_bounded_size_that_restore_every_row_in_order() {
    rt().block_on(async {
        for (root, _dir) in roots() {
            let given = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let state = state_with_streamed_part(100, 20_000, given.clone());
            let part_bytes = 16 << 10;
            let store = CheckpointStore::new(root, "p").with_streamed_part_bytes(part_bytes);
            let written = store
                .write_state(Epoch(1), 1, "agg", 0, &state)
                .await
                .unwrap();
            assert_eq!(given.load(std::sync::atomic::Ordering::Relaxed), 40);
            assert_eq!(written.len(), 2, "the held batch's file, then the part's");
            assert_eq!((written[0].files.len(), &written[0].batches), (1, &vec![0]));
            let part = &written[1];
            assert_eq!(part.batches, vec![1]);
            assert!(part.files.len() > 3, "{} files", part.files.len());
            let mut next = 0i64;
            for file in written.iter().flat_map(|w| &w.files) {
                // At most one batch (500 rows, under 8 KiB here) past the bound.
                assert!(file.bytes < (part_bytes + (8 << 10)) as u64, "{file:?}");
                for batch in store.read_state(file).await.unwrap() {
                    let k = batch
                        .column(1)
                        .as_any()
                        .downcast_ref::<Int64Array>()
                        .unwrap();
                    for value in k.iter() {
                        assert_eq!(value, Some(next), "every row once, in order");
                        next += 1;
                    }
                }
            }
            assert_eq!(next, 20_100);
            // Its source is read once: a second write of the same snapshot fails, typed.
            let again = store.write_state(Epoch(2), 1, "agg", 0, &state).await;
            assert!(matches!(again, Err(StateError::Read { .. })), "{again:?}");
        }
    });
}

/// What keeps a root alive: its directory or its server (held only to be dropped).
#[allow(dead_code)]
enum Backing {
    Dir(tempfile::TempDir),
    Server(moto::MotoServer),
    Memory,
}

fn roots() -> Vec<(StateRoot, Backing)> {
    let dir = tempfile::tempdir().unwrap();
    let file = StateRoot::parse(&format!("file://{}", dir.path().display())).unwrap();
    let server = moto::MotoServer::start("riffle-test");
    let s3 = StateRoot::parse_with_options(
        &format!("s3://{}/some/prefix", server.bucket),
        &[
            ("aws_endpoint", server.endpoint.as_str()),
            ("aws_allow_http", "true"),
            ("aws_access_key_id", "riffle-test"),
            ("aws_secret_access_key", "riffle-test"),
            ("aws_region", "us-east-1"),
        ],
    )
    .unwrap();
    vec![
        (file, Backing::Dir(dir)),
        (s3, Backing::Server(server)),
        (StateRoot::parse("memory://").unwrap(), Backing::Memory),
    ]
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn state_round_trips_through_parquet_files() {
    rt().block_on(async {
        for (root, _dir) in roots() {
            let store = CheckpointStore::new(root, "p");
            let manifest = write_epoch(&store, 1).await;
            let read = store
                .read_manifest(Epoch(1))
                .await
                .unwrap()
                .expect("manifest");
            assert_eq!(read, manifest);
            let files: Vec<_> = read.files().cloned().collect();
            assert!(files[0]
                .path
                .starts_with("checkpoints/epoch=000001/window/000-"));
            let batches = store.read_state(&files[0]).await.unwrap();
            assert_eq!(batches, vec![state(1000).batches[0].clone()]);
            store.verify(&read).await.unwrap();
        }
    });
}

#[test]
fn only_one_writer_prepares_an_epoch() {
    rt().block_on(async {
        for (root, _dir) in roots() {
            let store = CheckpointStore::new(root, "p");
            let manifest = write_epoch(&store, 7).await;
            let err = store.prepare(&manifest).await.unwrap_err();
            assert!(
                matches!(
                    err,
                    StateError::ManifestExists {
                        epoch: Epoch(7),
                        ..
                    }
                ),
                "{err}"
            );
        }
    });
}

#[test]
fn commit_is_idempotent() {
    rt().block_on(async {
        for (root, _dir) in roots() {
            let store = CheckpointStore::new(root, "p");
            let manifest = write_epoch(&store, 2).await;
            store.commit(&manifest).await.unwrap();
            store.commit(&manifest).await.unwrap();
            store.flip_latest(Epoch(2)).await.unwrap();
            let read = store.read_manifest(Epoch(2)).await.unwrap().unwrap();
            assert_eq!(read.status, ManifestStatus::Committed);
            assert_eq!(store.latest_hint().await, Some(Epoch(2)));
        }
    });
}

#[test]
fn damage_is_reported_with_the_file_and_recovery_falls_back() {
    rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let root = StateRoot::parse(dir.path().to_str().unwrap()).unwrap();
        let store = CheckpointStore::new(root, "p");
        let older = write_epoch(&store, 1).await;
        store.commit(&older).await.unwrap();
        let newer = write_epoch(&store, 2).await;
        store.commit(&newer).await.unwrap();
        let file = newer.files().next().unwrap().clone();
        let on_disk = dir.path().join("p").join(&file.path);
        let original = std::fs::read(&on_disk).unwrap();

        // Truncated.
        std::fs::write(&on_disk, &original[..original.len() / 2]).unwrap();
        let err = store.read_state(&file).await.unwrap_err().to_string();
        assert!(
            err.contains(&file.path) && err.contains("truncated"),
            "{err}"
        );

        // One byte flipped.
        let mut flipped = original.clone();
        flipped[original.len() / 3] ^= 0x40;
        std::fs::write(&on_disk, &flipped).unwrap();
        let err = store.read_state(&file).await.unwrap_err().to_string();
        assert!(err.contains(&file.path) && err.contains("CRC32C"), "{err}");

        // Removed.
        std::fs::remove_file(&on_disk).unwrap();
        let err = store.verify(&newer).await.unwrap_err().to_string();
        assert!(err.contains(&file.path) && err.contains("missing"), "{err}");

        // Recovery skips the damaged newest epoch and restores the previous one.
        let mut findings = Vec::new();
        for epoch in store.list_epochs().await.unwrap() {
            let finding = match store.read_manifest(epoch).await {
                Ok(Some(m)) => match store.verify(&m).await {
                    Ok(()) => EpochFinding::Valid(m),
                    Err(e) => EpochFinding::Damaged(e.to_string()),
                },
                Ok(None) => EpochFinding::Partial,
                Err(e) => EpochFinding::Damaged(e.to_string()),
            };
            findings.push((epoch, finding));
        }
        let plan = plan_recovery(&findings);
        assert_eq!(plan.restore, Some(Epoch(1)));
        assert!(plan.skipped[0].1.contains(&file.path));

        // A manifest that is not JSON, and a garbage _latest.json hint.
        let manifest_path = dir.path().join("p/checkpoints/epoch=000001/_manifest.json");
        std::fs::write(&manifest_path, b"{ this is not json").unwrap();
        let err = store.read_manifest(Epoch(1)).await.unwrap_err().to_string();
        assert!(
            err.contains("epoch=000001/_manifest.json") && err.contains("not a valid manifest"),
            "{err}"
        );
        std::fs::write(dir.path().join("p/_latest.json"), b"garbage").unwrap();
        assert_eq!(
            store.latest_hint().await,
            None,
            "a bad hint is ignored, not fatal"
        );
    });
}

#[test]
fn partial_epochs_are_listed_and_deleted_whole() {
    rt().block_on(async {
        for (root, _dir) in roots() {
            let store = CheckpointStore::new(root, "p");
            let m = write_epoch(&store, 3).await;
            store.commit(&m).await.unwrap();
            // Epoch 4: state written, no manifest (crashed before the commit point).
            store
                .write_state(Epoch(4), 1, "window", 0, &state(10))
                .await
                .unwrap();
            assert_eq!(store.list_epochs().await.unwrap(), vec![Epoch(3), Epoch(4)]);
            assert!(store.read_manifest(Epoch(4)).await.unwrap().is_none());
            store
                .delete_epoch(Epoch(4), &Default::default())
                .await
                .unwrap();
            assert_eq!(store.list_epochs().await.unwrap(), vec![Epoch(3)]);
        }
    });
}

#[test]
fn unsupported_roots_are_refused_clearly() {
    let err = StateRoot::parse("ftp://host/dir").unwrap_err().to_string();
    assert!(
        err.contains("file:///path") && err.contains("s3://") && err.contains("memory://"),
        "{err}"
    );
    let err = StateRoot::parse_with_options("s3://bucket/x", &[("aws_no_such_thing", "1")])
        .unwrap_err()
        .to_string();
    assert!(err.contains("aws_no_such_thing"), "{err}");
}

/// An S3 root on the server at `endpoint` (plain HTTP, dummy credentials).
fn s3_root_at(endpoint: &str) -> StateRoot {
    StateRoot::parse_with_options(
        "s3://riffle-test/p",
        &[
            ("aws_endpoint", endpoint),
            ("aws_allow_http", "true"),
            ("aws_access_key_id", "x"),
            ("aws_secret_access_key", "x"),
            ("aws_region", "us-east-1"),
        ],
    )
    .unwrap()
}

#[test]
fn an_unreachable_s3_server_is_a_clear_error() {
    // Nothing listens on this port: the error names the object, not a panic.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let root = s3_root_at(&endpoint);
    let store = CheckpointStore::new(root, "p");
    let err = rt()
        .block_on(store.write_state(Epoch(1), 1, "window", 0, &state(10)))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("checkpoints/epoch=000001/window/000-g1-0.parquet"),
        "{err}"
    );
}

/// Every committed manifest says PREPARED and has a COMMITTED marker beside it, so a
/// manifest read cost a second request; GC reads every retained manifest each epoch.
/// A store remembers the markers it wrote or saw, and forgets them with their epoch.
#[test]
fn a_store_reads_a_commit_marker_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = StateRoot::parse(dir.path().to_str().unwrap()).unwrap();
    let store = CheckpointStore::new(root.clone(), "p");
    let rt = rt();
    let manifest = rt.block_on(write_epoch(&store, 1));
    rt.block_on(store.commit(&manifest)).unwrap();
    let marker = dir
        .path()
        .join("p/checkpoints/epoch=000001/_committed.json");
    std::fs::remove_file(&marker).unwrap();
    let status = |s: &CheckpointStore| {
        rt.block_on(s.read_manifest(Epoch(1)))
            .unwrap()
            .map(|m| m.status)
    };
    assert_eq!(
        status(&store),
        Some(ManifestStatus::Committed),
        "remembered"
    );
    let fresh = CheckpointStore::new(root, "p");
    assert_eq!(
        status(&fresh),
        Some(ManifestStatus::Prepared),
        "another process reads the marker, which is gone"
    );
    rt.block_on(store.delete_epoch(Epoch(1), &Default::default()))
        .unwrap();
    assert_eq!(status(&store), None);
    // Written again after the deletion (a zombie's PREPARE): not taken as committed.
    let again = rt.block_on(write_epoch(&store, 1));
    assert_eq!(again.epoch, Epoch(1));
    assert_eq!(status(&store), Some(ManifestStatus::Prepared));
}

/// A store that accepts connections and never answers (a hung S3 endpoint, a black-holed
/// proxy) waited object_store's 30 s per request, although docs/operations.md promised
/// 15 s. A request for a small object is cut after `REQUEST_TIMEOUT` and retried only
/// within `RETRY_WINDOW`, so it fails within their sum.
#[test]
fn a_hung_s3_server_fails_a_request_within_the_documented_time() {
    use riffle_state::root::{REQUEST_TIMEOUT, RETRY_WINDOW};
    // Accepts, reads, never writes back; keeps every connection open.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let root = s3_root_at(&endpoint);
    let store = CheckpointStore::new(root, "p");
    let bound = REQUEST_TIMEOUT + RETRY_WINDOW + std::time::Duration::from_secs(3);
    // A listing (idempotent: retried) and a conditional create (not retried).
    let started = std::time::Instant::now();
    let listed = rt().block_on(store.newest_generation());
    let listing_took = started.elapsed();
    let started = std::time::Instant::now();
    let claimed = rt().block_on(store.claim_generation(1));
    let claim_took = started.elapsed();
    assert!(listed.is_err() && claimed.is_err());
    assert!(
        listing_took < bound && claim_took < bound,
        "a hung request took {listing_took:?} (listing) and {claim_took:?} (claim); the bound is {bound:?}"
    );
    assert!(
        listing_took >= REQUEST_TIMEOUT,
        "failed before any timeout: {listed:?}"
    );
}

#[test]
fn a_savepoint_is_a_copy_that_damage_to_its_checkpoint_does_not_reach() {
    use std::os::unix::fs::MetadataExt;
    rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let root = StateRoot::parse(dir.path().to_str().unwrap()).unwrap();
        let store = CheckpointStore::new(root, "p");
        let epoch = write_epoch(&store, 1).await;
        store.commit(&epoch).await.unwrap();
        let savepoint = store.promote(&epoch, "before-upgrade").await.unwrap();
        for (original, copy) in epoch.files().zip(savepoint.files()) {
            let original = dir.path().join("p").join(&original.path);
            let copy = dir.path().join("p").join(&copy.path);
            assert_eq!(
                std::fs::metadata(&copy).unwrap().nlink(),
                1,
                "{} must not be a hard link of {}",
                copy.display(),
                original.display()
            );
            // Damage the checkpoint's file in place (as a bad disk or a stray tool
            // would): the savepoint keeps its own bytes.
            std::fs::write(&original, b"damaged").unwrap();
        }
        assert!(store.verify(&epoch).await.is_err());
        store
            .verify(&savepoint)
            .await
            .expect("the savepoint is intact after its checkpoint was damaged");
    });
}

#[test]
fn the_first_process_to_store_a_job_token_sets_it_for_every_other() {
    rt().block_on(async {
        for (root, _dir) in roots() {
            let store = CheckpointStore::new(root, "p");
            assert_eq!(store.read_control_token().await.unwrap(), None);
            // Workers starting together: each offers its own; all get one.
            let offered = ["token-a", "token-b", "token-c"];
            let got = futures::future::join_all(offered.iter().map(|t| store.job_token(t))).await;
            let got: Vec<String> = got.into_iter().map(Result::unwrap).collect();
            assert!(offered.contains(&got[0].as_str()), "{got:?}");
            assert!(got.iter().all(|t| *t == got[0]), "{got:?}");
            // A later run keeps the job's token.
            assert_eq!(store.job_token("token-d").await.unwrap(), got[0]);
            assert_eq!(
                store.read_control_token().await.unwrap(),
                Some(got[0].clone())
            );
        }
    });
}

#[test]
fn each_worker_has_its_own_control_record() {
    rt().block_on(async {
        for (root, _dir) in roots() {
            let store = CheckpointStore::new(root, "p");
            store.write_control(Some(2), b"two".to_vec()).await.unwrap();
            store
                .write_control(Some(0), b"zero".to_vec())
                .await
                .unwrap();
            store
                .write_control(None, b"one process".to_vec())
                .await
                .unwrap();
            assert_eq!(store.control_workers().await.unwrap(), vec![0, 2]);
            assert_eq!(
                &store.read_control(Some(0)).await.unwrap().unwrap()[..],
                b"zero"
            );
            assert_eq!(
                &store.read_control(None).await.unwrap().unwrap()[..],
                b"one process"
            );
            store.delete_control(Some(0)).await.unwrap();
            assert_eq!(store.control_workers().await.unwrap(), vec![2]);
            assert_eq!(store.read_control(Some(0)).await.unwrap(), None);
        }
    });
}
