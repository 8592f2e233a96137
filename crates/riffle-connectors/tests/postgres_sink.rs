//! The PostgreSQL sink against a real server: prepared transactions invisible until
//! commit, idempotent commits, rollback of what no checkpoint committed, upserts by
//! key, the Arrow type mapping, TLS with a verified certificate, and clear errors
//! (missing table, password in the URL, a connection killed mid-epoch).

use crate::certs;
#[path = "support/postgres.rs"]
mod postgres;

use postgres::PgServer;
use riffle_connectors::{PostgresSinkConfig, PostgresSinkFactory, WriteMode};
use riffle_core::arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, StringArray,
    TimestampNanosecondArray, UInt64Array,
};
use riffle_core::arrow::datatypes::{DataType, Field, TimeUnit};
use riffle_core::{
    Committable, Committer, Epoch, RecordBatch, SinkContext, SinkFactory, StreamSchema,
};
use std::sync::Arc;

fn schema() -> StreamSchema {
    StreamSchema::with_timestamp(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ])
}

fn batch(schema: &StreamSchema, rows: &[(i64, &str)]) -> RecordBatch {
    let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
    let names: Vec<&str> = rows.iter().map(|r| r.1).collect();
    let ts: Vec<i64> = ids.iter().map(|i| i * 1_000).collect();
    RecordBatch::try_new(
        schema.schema.clone(),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(names)),
            Arc::new(TimestampNanosecondArray::from(ts).with_timezone("UTC")),
        ],
    )
    .unwrap()
}

fn ctx(subtask: usize, parallelism: usize) -> SinkContext {
    SinkContext {
        subtask,
        parallelism,
        exactly_once: true,
        generation: 1,
    }
}

fn committable(epoch: u64, subtask: usize, payload: String) -> Committable {
    Committable {
        sink: "out".into(),
        subtask,
        epoch: Epoch(epoch),
        payload,
    }
}

fn config(server: &PgServer, table: &str, mode: WriteMode) -> PostgresSinkConfig {
    let mut config = PostgresSinkConfig::new(server.url(), table, format!("test/{table}"));
    config.mode = mode;
    config.create_table = true;
    config
}

#[test]
fn append_is_invisible_until_commit_and_commits_are_idempotent() {
    let server = PgServer::start();
    let factory = PostgresSinkFactory::new(config(&server, "bids", WriteMode::Append)).unwrap();
    let schema = schema();
    let mut a = factory.create(&schema, &ctx(0, 2)).unwrap();
    let mut b = factory.create(&schema, &ctx(1, 2)).unwrap();
    a.write(&batch(&schema, &[(1, "a"), (2, "b")])).unwrap();
    b.write(&batch(&schema, &[(3, "c")])).unwrap();
    a.write(&batch(&schema, &[(4, "d")])).unwrap();
    let pa = a.pre_commit(Epoch(1)).unwrap().expect("rows were written");
    let pb = b.pre_commit(Epoch(1)).unwrap().expect("rows were written");
    assert!(
        b.pre_commit(Epoch(2)).unwrap().is_none(),
        "no rows, nothing to commit"
    );
    assert_eq!(server.rows("SELECT count(*) FROM bids"), ["0"]);
    assert_eq!(
        server.rows("SELECT gid FROM pg_prepared_xacts ORDER BY gid"),
        ["riffle/test/bids/1/0", "riffle/test/bids/1/1"]
    );
    factory.commit(&committable(1, 0, pa.clone())).unwrap();
    factory.commit(&committable(1, 1, pb)).unwrap();
    let all = "SELECT id || ':' || name FROM bids ORDER BY id";
    assert_eq!(server.rows(all), ["1:a", "2:b", "3:c", "4:d"]);
    // Recovery repeats the commit of a PREPARED epoch: nothing changes.
    factory.commit(&committable(1, 0, pa)).unwrap();
    assert_eq!(server.rows(all), ["1:a", "2:b", "3:c", "4:d"]);
    assert!(server.rows("SELECT gid FROM pg_prepared_xacts").is_empty());

    // Epoch 2 is prepared but no checkpoint commits it: recovery rolls it back, and a
    // commit of it afterwards is an error, not silent loss.
    a.write(&batch(&schema, &[(5, "e")])).unwrap();
    let p2 = a.pre_commit(Epoch(2)).unwrap().unwrap();
    // Rows after the last barrier are never committed.
    a.write(&batch(&schema, &[(6, "f")])).unwrap();
    assert_eq!(a.finish().unwrap().rows, 5);
    assert_eq!(factory.abort_staged(2).unwrap(), 1);
    assert_eq!(server.rows(all), ["1:a", "2:b", "3:c", "4:d"]);
    let err = factory
        .commit(&committable(2, 0, p2))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("riffle/test/bids/2/0") && err.contains("never committed"),
        "{err}"
    );
}

#[test]
fn upsert_keeps_the_last_row_per_key_across_epochs() {
    let server = PgServer::start();
    let mode = WriteMode::Upsert {
        key: vec!["id".into()],
    };
    let factory = PostgresSinkFactory::new(config(&server, "latest", mode)).unwrap();
    let schema = schema();
    let mut sink = factory.create(&schema, &ctx(0, 1)).unwrap();
    sink.write(&batch(&schema, &[(1, "a"), (2, "b"), (1, "c")]))
        .unwrap();
    sink.write(&batch(&schema, &[(2, "d")])).unwrap();
    let p1 = sink.pre_commit(Epoch(1)).unwrap().unwrap();
    assert_eq!(server.rows("SELECT count(*) FROM latest"), ["0"]);
    factory.commit(&committable(1, 0, p1.clone())).unwrap();
    let all = "SELECT id || ':' || name FROM latest ORDER BY id";
    assert_eq!(server.rows(all), ["1:c", "2:d"]);
    sink.write(&batch(&schema, &[(1, "e"), (3, "f")])).unwrap();
    let p2 = sink.pre_commit(Epoch(2)).unwrap().unwrap();
    factory.commit(&committable(2, 0, p2)).unwrap();
    factory.commit(&committable(1, 0, p1)).unwrap();
    assert_eq!(server.rows(all), ["1:e", "2:d", "3:f"]);
    assert_eq!(
        server.rows("SELECT string_agg(a.attname, ',') FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'latest'::regclass AND i.indisprimary"),
        ["id"]
    );
}

#[test]
fn arrow_types_map_to_postgres_types() {
    let server = PgServer::start();
    let factory = PostgresSinkFactory::new(config(&server, "typed", WriteMode::Append)).unwrap();
    let schema = StreamSchema::with_timestamp(vec![
        Field::new("i32", DataType::Int32, true),
        Field::new("u64", DataType::UInt64, true),
        Field::new("f64", DataType::Float64, true),
        Field::new("flag", DataType::Boolean, true),
        Field::new("text", DataType::Utf8, true),
        Field::new(
            "at",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
    ]);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(vec![Some(-7), None])),
        Arc::new(UInt64Array::from(vec![Some(1 << 40), None])),
        Arc::new(Float64Array::from(vec![Some(2.5), None])),
        Arc::new(BooleanArray::from(vec![Some(true), None])),
        Arc::new(StringArray::from(vec![Some("é'\""), None])),
        Arc::new(
            riffle_core::arrow::array::TimestampMillisecondArray::from(vec![
                Some(1_700_000_000_123),
                None,
            ])
            .with_timezone("UTC"),
        ),
        Arc::new(TimestampNanosecondArray::from(vec![0, 0]).with_timezone("UTC")),
    ];
    let batch = RecordBatch::try_new(schema.schema.clone(), columns).unwrap();
    let mut sink = factory.create(&schema, &ctx(0, 1)).unwrap();
    sink.write(&batch).unwrap();
    let p = sink.pre_commit(Epoch(1)).unwrap().unwrap();
    factory.commit(&committable(1, 0, p)).unwrap();
    assert_eq!(
        server.rows("SELECT string_agg(column_name || ' ' || data_type, ', ' ORDER BY ordinal_position) FROM information_schema.columns WHERE table_name = 'typed'"),
        ["i32 integer, u64 bigint, f64 double precision, flag boolean, text text, at timestamp with time zone"]
    );
    assert_eq!(
        server.rows("SELECT i32, u64, f64, flag, text, at AT TIME ZONE 'UTC' FROM typed ORDER BY i32 NULLS LAST"),
        ["-7|1099511627776|2.5|t|é'\"|2023-11-14 22:13:20.123", "|||||"]
    );
}

fn create_error(factory: &PostgresSinkFactory) -> String {
    match factory.create(&schema(), &ctx(0, 1)) {
        Ok(_) => panic!("the sink was created"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn configuration_errors_name_what_to_fix() {
    let server = PgServer::start();
    let mut missing = config(&server, "nowhere", WriteMode::Append);
    missing.create_table = false;
    let factory = PostgresSinkFactory::new(missing).unwrap();
    let err = create_error(&factory);
    assert!(
        err.contains("table `nowhere` does not exist") && err.contains("'create' = 'true'"),
        "{err}"
    );

    server.psql("riffle", "CREATE TABLE narrow (id BIGINT)");
    let mut narrow = config(&server, "narrow", WriteMode::Append);
    narrow.create_table = false;
    let err = create_error(&PostgresSinkFactory::new(narrow).unwrap());
    assert!(err.contains("has no column `name`"), "{err}");

    let with_password = PostgresSinkConfig::new(
        format!("postgres://riffle:hunter2@127.0.0.1:{}/riffle", server.port),
        "t",
        "x",
    );
    let err = PostgresSinkFactory::new(with_password)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("password.env") && !err.contains("hunter2"),
        "{err}"
    );

    let unreachable = PostgresSinkConfig::new("postgres://riffle@127.0.0.1:1/riffle", "t", "x");
    let err = create_error(&PostgresSinkFactory::new(unreachable).unwrap());
    assert!(
        err.contains("PostgreSQL at 127.0.0.1:1/riffle") && err.contains("cannot connect"),
        "{err}"
    );
}

#[test]
fn a_connection_killed_mid_epoch_fails_the_epoch_and_loses_nothing_committed() {
    let server = PgServer::start();
    let factory = PostgresSinkFactory::new(config(&server, "killed", WriteMode::Append)).unwrap();
    let schema = schema();
    let mut sink = factory.create(&schema, &ctx(0, 1)).unwrap();
    sink.write(&batch(&schema, &[(1, "a")])).unwrap();
    let p1 = sink.pre_commit(Epoch(1)).unwrap().unwrap();
    factory.commit(&committable(1, 0, p1)).unwrap();
    sink.write(&batch(&schema, &[(2, "b")])).unwrap();
    server.psql(
        "riffle",
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'riffle' AND backend_xid IS NOT NULL",
    );
    let err = sink
        .write(&batch(&schema, &[(3, "c")]))
        .and_then(|_| sink.pre_commit(Epoch(2)))
        .unwrap_err()
        .to_string();
    assert!(err.contains("PostgreSQL at"), "{err}");
    // The restarted job rolls back leftovers and replays epoch 2 from the checkpoint.
    assert_eq!(factory.abort_staged(2).unwrap(), 0);
    let mut again = factory.create(&schema, &ctx(0, 1)).unwrap();
    again.write(&batch(&schema, &[(2, "b"), (3, "c")])).unwrap();
    let p2 = again.pre_commit(Epoch(2)).unwrap().unwrap();
    factory.commit(&committable(2, 0, p2)).unwrap();
    assert_eq!(
        server.rows("SELECT id FROM killed ORDER BY id"),
        ["1", "2", "3"]
    );
}

#[test]
fn tls_connections_verify_the_server_and_commit_exactly_once() {
    let server = PgServer::start_with_tls();
    let with_url = |url: String| {
        let mut c = config(&server, "secure", WriteMode::Append);
        c.url = url;
        PostgresSinkFactory::new(c).unwrap()
    };
    // Trusting the server's certificate by sslrootcert, as libpq users write it.
    let factory = with_url(format!(
        "{}?sslmode=verify-full&sslrootcert={}",
        server.url(),
        server.ca().display()
    ));
    let schema = schema();
    let mut sink = factory.create(&schema, &ctx(0, 1)).unwrap();
    sink.write(&batch(&schema, &[(1, "a"), (2, "b")])).unwrap();
    let prepared = sink.pre_commit(Epoch(1)).unwrap().unwrap();
    assert_eq!(server.rows("SELECT count(*) FROM secure"), ["0"]);
    factory.commit(&committable(1, 0, prepared)).unwrap();
    assert_eq!(
        server.rows("SELECT id || ':' || name FROM secure ORDER BY id"),
        ["1:a", "2:b"]
    );
    assert_eq!(
        server.rows("SELECT count(*) > 0 AND bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'riffle'"),
        ["t"],
        "the sink's connection is not encrypted"
    );
    // This server refuses plain connections ...
    let e = create_error(&with_url(server.url()));
    assert!(
        e.contains("no encryption") && e.contains("add ?sslmode=verify-full"),
        "{e}"
    );
    // ... and its certificate, signed by no CA of the system, is not trusted by default.
    let e = create_error(&with_url(format!("{}?sslmode=require", server.url())));
    assert!(
        e.contains("certificate") && e.contains("sslrootcert"),
        "{e}"
    );
}
