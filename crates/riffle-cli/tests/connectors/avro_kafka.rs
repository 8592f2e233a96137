//! Avro values through a real broker (tansu), against an independent implementation:
//! fastavro writes the records riffle reads and reads the records riffle writes, and a
//! stand-in schema registry (`schema_registry.py`, the documented REST subset; no
//! registry server is installable here) holds the schemas. Plain `avro` with a writer
//! schema that has a field the table lacks; `avro-confluent` whose records were written
//! with two schema versions (the later adds a field with a default); a sink registering
//! its schema; and a registration the registry's compatibility rule refuses.

use super::kafka::KafkaBroker;
use super::{committed_transactions, kill_randomly, pipeline, run, succeed};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

/// The stand-in schema registry on a free port of 127.0.0.1.
struct Registry {
    child: Child,
    url: String,
}

impl Registry {
    fn start(dir: &Path) -> Self {
        let port_file = dir.join("registry.port");
        let child = Command::new(python())
            .arg(script("schema_registry.py"))
            .arg(&port_file)
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let port = loop {
            if let Ok(p) = std::fs::read_to_string(&port_file) {
                if let Ok(p) = p.trim().parse::<u16>() {
                    break p;
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the registry did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn python() -> String {
    std::env::var("RIFFLE_FASTAVRO_PYTHON")
        .expect("RIFFLE_FASTAVRO_PYTHON: a Python with fastavro (scripts/test installs it)")
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/connectors")
        .join(name)
}

fn avro_tool(args: &[&str]) -> String {
    let out = Command::new(python())
        .arg(script("avro_tool.py"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "avro_tool.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// fastavro's values of `rows` (JSON lines) with `schema`, framed for the registry
/// when `registry` is given; as (partition by id % 2, value, timestamp) records.
fn fastavro_records(
    dir: &Path,
    name: &str,
    schema: &str,
    rows: &[String],
    registry: Option<(&str, &str)>,
) -> Vec<(i32, Vec<u8>, i64)> {
    let schema_file = dir.join(format!("{name}.avsc"));
    std::fs::write(&schema_file, schema).unwrap();
    let rows_file = dir.join(format!("{name}.jsonl"));
    std::fs::write(&rows_file, rows.join("\n") + "\n").unwrap();
    let out = dir.join(name);
    let mut args = vec![
        "write".to_string(),
        schema_file.display().to_string(),
        rows_file.display().to_string(),
        out.display().to_string(),
    ];
    if let Some((url, subject)) = registry {
        args.extend([url.to_string(), subject.to_string()]);
    }
    avro_tool(&args.iter().map(String::as_str).collect::<Vec<_>>());
    rows.iter()
        .enumerate()
        .map(|(n, row)| {
            let value: serde_json::Value = serde_json::from_str(row).unwrap();
            let id = value["id"].as_i64().unwrap();
            let bytes = std::fs::read(out.join(format!("{n:06}.avro"))).unwrap();
            ((id % 2) as i32, bytes, value["ts"].as_i64().unwrap())
        })
        .collect()
}

/// The committed values of `topic`, decoded by fastavro with `schema_or_registry`.
fn fastavro_read(
    broker: &KafkaBroker,
    topic: &str,
    state: &Path,
    dir: &Path,
    schema_or_registry: &str,
) -> BTreeSet<String> {
    let committed = committed_transactions(state);
    let out = dir.join(format!("{topic}-read"));
    std::fs::create_dir_all(&out).unwrap();
    for (n, (_, value)) in broker
        .committed_keyed(topic, 2, &committed)
        .into_iter()
        .enumerate()
    {
        std::fs::write(out.join(format!("{n:06}.avro")), value.expect("a value")).unwrap();
    }
    let text = avro_tool(&["read", &out.display().to_string(), schema_or_registry]);
    text.lines().map(str::to_string).collect()
}

const V1: &str = r#"{"type": "record", "name": "Person", "namespace": "example", "fields": [
  {"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"]},
  {"name": "ts", "type": "long"}]}"#;
/// V1 and a score (with a default): BACKWARD compatible.
const V2: &str = r#"{"type": "record", "name": "Person", "namespace": "example", "fields": [
  {"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"]},
  {"name": "ts", "type": "long"}, {"name": "score", "type": "double", "default": 0.5}]}"#;
/// The plain topic's writer schema: the table's columns and a note the table lacks.
const PLAIN: &str = r#"{"type": "record", "name": "Reading", "fields": [
  {"name": "id", "type": "long"}, {"name": "note", "type": "string"},
  {"name": "name", "type": ["null", "string"]}, {"name": "score", "type": "double"},
  {"name": "ts", "type": "long"}]}"#;
/// What riffle writes to the plain output topic.
const PLAIN_OUT: &str = r#"{"type": "record", "name": "Doubled", "fields": [
  {"name": "id", "type": ["null", "long"]}, {"name": "name", "type": ["null", "string"]},
  {"name": "score", "type": ["null", "double"]}]}"#;

#[test]
fn avro_values_written_by_fastavro_are_read_and_riffle_writes_what_fastavro_reads() {
    let broker = KafkaBroker::start();
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::start(dir.path());
    for topic in ["plain", "registered", "plain-out", "registered-out"] {
        broker.create_topic(topic, 2);
    }
    let name = |id: i64| {
        if id % 5 == 0 {
            "null".to_string()
        } else {
            format!("\"p{id}\"")
        }
    };
    let plain_rows: Vec<String> = (0..300i64)
        .map(|id| {
            format!(
                r#"{{"id": {id}, "note": "n{id}", "name": {}, "score": {}.25, "ts": {}}}"#,
                name(id),
                id % 40,
                1_000_000 + id
            )
        })
        .collect();
    broker.produce(
        "plain",
        &fastavro_records(dir.path(), "plain", PLAIN, &plain_rows, None),
    );
    // The registered topic: the first half written with V1, the rest with V2.
    let registered = |id: i64| {
        let base = format!(
            r#""id": {id}, "name": {}, "ts": {}"#,
            name(id),
            2_000_000 + id
        );
        if id < 150 {
            format!("{{{base}}}")
        } else {
            format!(r#"{{{base}, "score": {}.75}}"#, id % 30)
        }
    };
    let v1: Vec<String> = (0..150).map(registered).collect();
    let v2: Vec<String> = (150..300).map(registered).collect();
    let subject = Some((registry.url.as_str(), "registered-value"));
    let mut records = fastavro_records(dir.path(), "v1", V1, &v1, subject);
    records.extend(fastavro_records(dir.path(), "v2", V2, &v2, subject));
    broker.produce("registered", &records);

    let text = format!(
        "CREATE TABLE plain (id BIGINT, name VARCHAR, score DOUBLE, ts BIGINT,
           WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
           WITH ('connector' = 'kafka', 'bootstrap.servers' = '{kafka}', 'topic' = 'plain',
                 'format' = 'avro', 'avro.schema' = '{PLAIN}',
                 'scan.bounded.mode' = 'latest-offset', 'scan.max-records-per-second' = '400');
         CREATE TABLE registered (id BIGINT, name VARCHAR, score DOUBLE, ts BIGINT,
           WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
           WITH ('connector' = 'kafka', 'bootstrap.servers' = '{kafka}', 'topic' = 'registered',
                 'format' = 'avro-confluent', 'avro-confluent.url' = '{url}',
                 'scan.bounded.mode' = 'latest-offset', 'scan.max-records-per-second' = '400');
         CREATE TABLE plain_out (id BIGINT, name VARCHAR, score DOUBLE)
           WITH ('connector' = 'kafka', 'bootstrap.servers' = '{kafka}', 'topic' = 'plain-out',
                 'format' = 'avro', 'avro.schema' = '{PLAIN_OUT}');
         CREATE TABLE registered_out (id BIGINT, name VARCHAR, score DOUBLE)
           WITH ('connector' = 'kafka', 'bootstrap.servers' = '{kafka}', 'topic' = 'registered-out',
                 'format' = 'avro-confluent', 'avro-confluent.url' = '{url}');
         INSERT INTO plain_out SELECT id, name, score * 2 AS score FROM plain;
         INSERT INTO registered_out SELECT id, upper(name) AS name, score FROM registered;",
        kafka = broker.bootstrap,
        url = registry.url
    );
    let file = pipeline(dir.path(), "avro", &text);
    let state = dir.path().join("state");
    let parallelism = std::cell::Cell::new(0);
    kill_randomly(1, 0xa5a5_0011, || {
        parallelism.set(parallelism.get() % 2 + 1);
        run(&file, &state, parallelism.get())
    });
    succeed(&mut run(&file, &state, 2));

    let json_name = |id: i64| {
        if id % 5 == 0 {
            "null".to_string()
        } else {
            format!("\"p{id}\"")
        }
    };
    // fastavro prints records with sorted keys.
    let expected: BTreeSet<String> = (0..300i64)
        .map(|id| {
            format!(
                r#"{{"id": {id}, "name": {}, "score": {:?}}}"#,
                json_name(id),
                ((id % 40) as f64 + 0.25) * 2.0
            )
        })
        .collect();
    let plain_path = dir.path().join("plain_out.avsc");
    std::fs::write(&plain_path, PLAIN_OUT).unwrap();
    let got = fastavro_read(
        &broker,
        "plain-out",
        &state,
        dir.path(),
        &plain_path.display().to_string(),
    );
    assert_eq!(got, expected, "plain avro out, read by fastavro");

    // V1 records have no score: the table's schema, the reader, gives its default
    // (NULL), as Avro's resolution rules say (V2's default is a writer's, not used).
    // Names upper-cased.
    let expected: BTreeSet<String> = (0..300i64)
        .map(|id| {
            let name = if id % 5 == 0 {
                "null".to_string()
            } else {
                format!("\"P{id}\"")
            };
            let score = if id < 150 {
                "null".to_string()
            } else {
                format!("{:?}", (id % 30) as f64 + 0.75)
            };
            format!(r#"{{"id": {id}, "name": {name}, "score": {score}}}"#)
        })
        .collect();
    let got = fastavro_read(&broker, "registered-out", &state, dir.path(), &registry.url);
    assert_eq!(
        got, expected,
        "avro-confluent out, read by fastavro via the registry"
    );

    // A sink whose schema the subject's compatibility rule refuses fails, saying so.
    let refused = format!(
        "CREATE TABLE src (id BIGINT, ts BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
           WITH ('connector' = 'kafka', 'bootstrap.servers' = '{kafka}', 'topic' = 'plain',
                 'format' = 'avro', 'avro.schema' = '{PLAIN}', 'scan.bounded.mode' = 'latest-offset');
         CREATE TABLE out (id VARCHAR)
           WITH ('connector' = 'kafka', 'bootstrap.servers' = '{kafka}', 'topic' = 'registered-out',
                 'format' = 'avro-confluent', 'avro-confluent.url' = '{url}',
                 'avro-confluent.subject' = 'registered-value');
         INSERT INTO out SELECT CAST(id AS VARCHAR) AS id FROM src;",
        kafka = broker.bootstrap,
        url = registry.url
    );
    let file = pipeline(dir.path(), "refused", &refused);
    let out = run(&file, &dir.path().join("refused-state"), 1)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("incompatible"), "{stderr}");
}
