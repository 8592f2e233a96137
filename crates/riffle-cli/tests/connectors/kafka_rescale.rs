//! Defect 2 of the exactly-once issue, end to end: a Kafka source subtask that has not
//! seen a record on one of its partitions has no watermark when a checkpoint is taken.
//! A restore at another parallelism took the lowest *known* watermark, so the restored
//! job started ahead of that partition: its records arrived behind the watermark and
//! were dropped as late, and windows the restored state held were discarded as already
//! fired. The committed table is compared with windows computed here from the records.

use super::common::stop_with_savepoint;
use super::kafka::KafkaBroker;
use super::postgres::PgServer;
use super::{crash, pipeline, run_restarting};
use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Records; record i is on partition i % 3, auction i % 40, price i, at i × 10 ms.
const RECORDS: i64 = 60_000;

fn bid(i: i64, partition: i32) -> (i32, Vec<u8>, i64) {
    let json = format!(
        "{{\"auction\":{},\"bidder\":{i},\"price\":{i},\"date_time\":{}}}",
        i % 40,
        i * 10
    );
    (partition, json.into_bytes(), i * 10)
}

/// Per auction and 10-second window: bids and the top price, as `auction,start_s,n,max`.
fn expected_windows() -> Vec<String> {
    let mut windows: BTreeMap<(i64, i64), (i64, i64)> = BTreeMap::new();
    for i in 0..RECORDS {
        let w = windows.entry((i % 40, i * 10 / 10_000 * 10)).or_default();
        w.0 += 1;
        w.1 = w.1.max(i);
    }
    let mut rows: Vec<String> = windows
        .into_iter()
        .map(|((auction, start), (n, top))| format!("{auction},{start},{n},{top}"))
        .collect();
    rows.sort();
    rows
}

#[test]
fn a_restore_at_another_parallelism_never_starts_ahead_of_an_unread_partition() {
    let broker = KafkaBroker::start();
    let server = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    broker.create_topic("rescale", 3);
    // Partitions 0 and 1 first; partition 2 stays empty while the first run reads, so
    // the subtask that owns partitions 0 and 2 has no watermark at its checkpoints.
    let early: Vec<_> = (0..RECORDS)
        .filter(|i| i % 3 != 2)
        .map(|i| bid(i, (i % 3) as i32))
        .collect();
    broker.produce("rescale", &early);
    let file = pipeline(
        dir.path(),
        "rescale",
        &format!(
            "CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP,
               WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND)
             WITH ('connector' = 'kafka', 'bootstrap.servers' = '{bootstrap}', 'topic' = 'rescale',
                   'format' = 'json', 'group.id' = 'riffle-rescale',
                   'scan.max-records-per-second' = '5K');
             CREATE TABLE windows (auction BIGINT, window_start TIMESTAMP, bids BIGINT, max_price BIGINT)
               WITH ('connector' = 'postgres', 'url' = '{url}', 'create' = 'true');
             INSERT INTO windows
             SELECT auction, w['start'] AS window_start, bids, max_price
             FROM (SELECT auction, count(*) AS bids, max(price) AS max_price,
                          tumble(INTERVAL '10' SECOND) AS w
                   FROM bids GROUP BY auction, w) per_window;",
            bootstrap = broker.bootstrap,
            url = server.url()
        ),
    );
    let state = dir.path().join("state");
    let mut first = run_restarting(&file, &state, 2);
    first.args(["--restart", "none"]);
    crash(&mut first, "after-latest-flip:20");
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(state.join("rescale/checkpoints/epoch=000020/_manifest.json")).unwrap(),
    )
    .unwrap();
    let source = manifest["operators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["operator"] == "bids")
        .unwrap_or_else(|| panic!("no source entry: {manifest}"));
    let watermarks: Vec<&serde_json::Value> = source["subtasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["watermark"])
        .collect();
    let all: Vec<String> = manifest["operators"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let w: Vec<String> = o["subtasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["watermark"].to_string())
                .collect();
            format!("{}: {}", o["operator"], w.join(" "))
        })
        .collect();
    assert!(
        watermarks.iter().any(|w| w.is_null()) && watermarks.iter().any(|w| !w.is_null()),
        "the checkpoint must hold a subtask without a watermark beside one with: {all:?} {}",
        manifest["watermark"]
    );

    // The rest arrives while the job is down (every event time, so a watermark taken
    // from the other subtask would make most of it late), and one record per partition
    // far in event time, so that every window of the bids fires.
    let mut late: Vec<_> = (0..RECORDS)
        .filter(|i| i % 3 == 2)
        .map(|i| bid(i, 2))
        .collect();
    for partition in 0..3 {
        let json = format!(
            "{{\"auction\":999,\"bidder\":0,\"price\":0,\"date_time\":{}}}",
            3_600_000
        );
        late.push((partition, json.into_bytes(), 3_600_000));
    }
    broker.produce("rescale", &late);

    let job = run_restarting(&file, &state, 1)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let counted = || {
        server.rows("SELECT coalesce(sum(bids), 0) FROM windows WHERE auction < 40")
            == [RECORDS.to_string()]
    };
    while !counted() {
        if Instant::now() > deadline {
            let counted =
                server.rows("SELECT coalesce(sum(bids), 0) FROM windows WHERE auction < 40");
            let (_, text) = stop_with_savepoint(job);
            panic!("not every bid counted in 60 s: {counted:?}\n{text}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let (_, text) = stop_with_savepoint(job);
    assert!(
        text.contains("rescaled 2 → 1") || text.contains("from checkpoint epoch"),
        "{text}"
    );
    assert!(text.contains("late rows dropped 0"), "{text}");
    let got = server.rows(
        "SELECT auction || ',' || extract(epoch FROM window_start)::bigint || ',' || bids || ',' || max_price
         FROM windows WHERE auction < 40 ORDER BY 1",
    );
    let mut got = got;
    got.sort();
    let expected = expected_windows();
    assert_eq!(
        got.len(),
        expected.len(),
        "window rows: a duplicate or a missing window"
    );
    assert!(
        got == expected,
        "windows differ from those computed from the records"
    );
}
