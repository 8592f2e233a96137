//! The Kafka source: each subtask reads the partitions `p` with
//! `p % parallelism == subtask`; the next offset of every partition is its state, so a
//! restored job reads each record exactly once more. The watermark follows the slowest
//! partition that is not idle. Consumer-group offsets are committed (advisory, for
//! monitoring tools) only once a checkpoint holding them is COMMITTED.

use super::errors::{poll_error, topic_error_passes, PollError};
use super::format::{BadRecord, ValueDecoder, Values};
use super::offsets::{decode_positions, encode_positions, PartitionPosition};
use super::REQUEST_TIMEOUT;
use crate::time_columns::event_time_nanos;
use crate::MalformedRecords;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use riffle_core::arrow::array::{Array, ArrayRef, AsArray, TimestampMillisecondArray};
use riffle_core::arrow::compute::filter;
use riffle_core::arrow::compute::kernels::cast::cast;
use riffle_core::{
    row_kind_array, Epoch, Error, EventTime, OperatorState, RecordBatch, Result, Source,
    SourcePoll, StreamSchema,
};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod factory;
mod lag;

pub use factory::{KafkaSourceConfig, KafkaSourceFactory, KafkaStartup, KafkaTimestamp};

struct KafkaSource {
    config: Arc<KafkaSourceConfig>,
    output: StreamSchema,
    values: ValueDecoder,
    /// An upsert topic's decoder (record keys and tombstones too).
    upsert: Option<super::upsert::UpsertDecoder>,
    consumer: BaseConsumer<lag::LagContext>,
    subtask: usize,
    parallelism: usize,
    counters: Arc<riffle_core::operator::OperatorCounters>,
    /// Positions from a checkpoint, of every partition (any subtask's).
    restored: BTreeMap<i32, PartitionPosition>,
    /// This subtask's partitions.
    partitions: BTreeMap<i32, PartitionPosition>,
    started: bool,
    /// When the topic's metadata first answered with a passing error (a partition
    /// without a leader yet): start waits for it, up to the request timeout.
    metadata_waiting_since: Option<Instant>,
    /// Offsets at recent barriers, committed to the group once their epoch commits.
    snapshots: VecDeque<(Epoch, Vec<(i32, i64)>)>,
    /// With a rate cap: when this subtask started, and records read since.
    throttle: Option<(Instant, u64)>,
    /// When each partition last delivered a record (or was assigned): partitions
    /// quiet for longer than the idle timeout do not hold the watermark back.
    last_delivery: BTreeMap<i32, Instant>,
    /// Quiet partitions asked of the broker: when, and whether nothing was left to
    /// read. Only a partition caught up with the broker is idle: one whose backlog
    /// merely has not been fetched yet (after a restore, under a rate cap) would
    /// otherwise stop holding the watermark and have its records dropped as late.
    caught_up: BTreeMap<i32, (Instant, bool)>,
    /// Each partition's split name for the metrics (`topic/partition`), made once.
    split_names: BTreeMap<i32, String>,
    /// When a poll last found nothing more fetched: every partition was caught up.
    drained_at: Option<Instant>,
}

impl KafkaSource {
    /// How long a quiet partition may hold the watermark back. A bounded source never
    /// idles a partition: its output must not depend on timing.
    fn idle_timeout(&self) -> Option<Duration> {
        self.config
            .partition_idle_timeout
            .filter(|_| !self.config.bounded)
    }

    fn location(&self, partition: i32, offset: i64) -> String {
        record_location(&self.config.topic, partition, offset)
    }

    /// Finds this subtask's partitions and where each starts; assigns them. `false`
    /// while the topic's metadata answers with a passing error (the poll is pending).
    fn start(&mut self) -> Result<bool> {
        let config = self.config.clone();
        let client = &config.client;
        let metadata = self
            .consumer
            .fetch_metadata(Some(&config.topic), REQUEST_TIMEOUT)
            .map_err(|e| {
                client.error(format!(
                    "cannot read metadata of topic `{}`: {e}; is the broker running?",
                    config.topic
                ))
            })?;
        let found = metadata.topics().iter().find(|t| t.name() == config.topic);
        let topic = match found.map(|t| (t, t.error())) {
            Some((t, None)) if !t.partitions().is_empty() => t,
            Some((_, Some(error))) if topic_error_passes(error) => {
                let since = *self.metadata_waiting_since.get_or_insert_with(Instant::now);
                if since.elapsed() < REQUEST_TIMEOUT {
                    return Ok(false);
                }
                return Err(client.error(format!(
                    "topic `{}` answered {error:?} for {} s; is the broker healthy?",
                    config.topic,
                    REQUEST_TIMEOUT.as_secs()
                )));
            }
            _ => {
                return Err(client.error(format!(
                    "topic `{}` does not exist; create it, or check 'topic'",
                    config.topic
                )))
            }
        };
        let mine: Vec<i32> = topic
            .partitions()
            .iter()
            .map(|p| p.id())
            .filter(|p| (*p as usize) % self.parallelism == self.subtask)
            .collect();
        for &p in &mine {
            // A restored partition already knows where it is and where it stops.
            if let Some(restored) = self.restored.get(&p) {
                self.partitions.insert(p, *restored);
                continue;
            }
            let (low, high) = self
                .consumer
                .fetch_watermarks(&config.topic, p, REQUEST_TIMEOUT)
                .map_err(|e| {
                    client.error(format!(
                        "cannot read offsets of `{}` partition {p}: {e}",
                        config.topic
                    ))
                })?;
            let position = PartitionPosition {
                next: self.initial_offset(p, low, high)?,
                stop: config.bounded.then_some(high),
                newest: EventTime::MIN,
            };
            self.partitions.insert(p, position);
        }
        let mut assignment = TopicPartitionList::new();
        for (p, position) in &self.partitions {
            assignment
                .add_partition_offset(&config.topic, *p, Offset::Offset(position.next))
                .map_err(|e| client.error(e))?;
        }
        self.consumer
            .assign(&assignment)
            .map_err(|e| client.error(format!("cannot assign partitions: {e}")))?;
        let now = Instant::now();
        self.last_delivery = self.partitions.keys().map(|p| (*p, now)).collect();
        self.started = true;
        Ok(true)
    }

    /// The first offset of partition `p` (low..high are its retained offsets).
    fn initial_offset(&self, p: i32, low: i64, high: i64) -> Result<i64> {
        let config = &self.config;
        let lookup = |offset: Offset| -> Result<Option<i64>> {
            let mut list = TopicPartitionList::new();
            list.add_partition_offset(&config.topic, p, offset)
                .map_err(|e| config.client.error(e))?;
            let found = match offset {
                Offset::Offset(_) => self.consumer.offsets_for_times(list, REQUEST_TIMEOUT),
                _ => self.consumer.committed_offsets(list, REQUEST_TIMEOUT),
            }
            .map_err(|e| {
                config
                    .client
                    .error(format!("cannot look up offsets of partition {p}: {e}"))
            })?;
            Ok(found
                .find_partition(&config.topic, p)
                .and_then(|e| match e.offset() {
                    Offset::Offset(o) => Some(o),
                    _ => None,
                }))
        };
        Ok(match config.startup {
            KafkaStartup::Earliest => low,
            KafkaStartup::Latest => high,
            KafkaStartup::GroupOffsets => lookup(Offset::Stored)?.unwrap_or(low),
            KafkaStartup::Timestamp(ms) => lookup(Offset::Offset(ms))?.unwrap_or(high),
        }
        .clamp(low, high))
    }

    /// Caught up: moves each partition's next offset to the consumer's position, which
    /// is past offsets no record is delivered for (transaction markers, aborted
    /// records), so a bounded partition whose last offsets are such ends.
    fn skip_invisible_offsets(&mut self) -> Result<()> {
        let positions = self.consumer.position().map_err(|e| {
            self.config
                .client
                .error(format!("reading positions of `{}`: {e}", self.config.topic))
        })?;
        for element in positions.elements_for_topic(&self.config.topic) {
            if let (Offset::Offset(at), Some(p)) = (
                element.offset(),
                self.partitions.get_mut(&element.partition()),
            ) {
                p.next = p.next.max(at);
            }
        }
        Ok(())
    }

    /// Asks the broker, at most once a second per partition, whether each partition
    /// quiet for `timeout` has anything left to read (see `caught_up`). A failed
    /// question counts as "not caught up": the watermark waits.
    fn ask_quiet_partitions(&mut self, timeout: Duration, now: Instant) {
        for (p, position) in &self.partitions {
            let quiet = self
                .last_delivery
                .get(p)
                .is_some_and(|at| now.duration_since(*at) >= timeout);
            let asked_lately = self
                .caught_up
                .get(p)
                .is_some_and(|(at, _)| now.duration_since(*at) < Duration::from_secs(1));
            if !quiet || asked_lately || position.done() {
                continue;
            }
            let caught_up = self
                .consumer
                .fetch_watermarks(&self.config.topic, *p, Duration::from_secs(1))
                .is_ok_and(|(_, high)| position.next >= high);
            self.caught_up.insert(*p, (now, caught_up));
        }
    }

    /// Reports each partition's records yet to read, as far as statistics have told.
    fn report_pending(&mut self) {
        let context = self.consumer.context();
        for (p, position) in &self.partitions {
            if let Some(end) = context.end_of(*p) {
                let split = self
                    .split_names
                    .entry(*p)
                    .or_insert_with(|| format!("{}/{p}", self.config.topic));
                let end = if position.done() { position.next } else { end };
                self.counters
                    .set_pending(split, lag::pending(end, position.next));
            }
        }
    }

    /// Decodes polled records into an output batch; malformed ones fail or are skipped.
    fn decode_batch(
        &mut self,
        records: Vec<Polled>,
        values: &Values,
        keys: &Values,
    ) -> Result<Option<RecordBatch>> {
        let skip = self.config.on_malformed == MalformedRecords::Skip;
        let topic = self.config.topic.clone();
        let malformed = |bad: BadRecord| {
            let r = &records[bad.index];
            Error::MalformedMessage {
                location: record_location(&topic, r.partition, r.offset),
                field: bad.field,
                message: format!("{}; fix the record, or set 'on_malformed' = 'skip' to skip and count such records", bad.message),
            }
        };
        // Rows decoded, each row's record, and (Debezium) each row's kind.
        let (batch, rows_of, kinds) = if let Some(upsert) = &mut self.upsert {
            let times: Vec<Option<i64>> = records.iter().map(|r| r.timestamp_ms).collect();
            let changes = upsert
                .decode(values, keys, &times, skip)
                .map_err(malformed)?;
            self.counters.add_skipped(changes.skipped.len() as u64);
            (changes.batch, changes.records, Some(changes.kinds))
        } else if self.values.is_changelog() {
            let changes = self
                .values
                .decode_changes(values, skip)
                .map_err(malformed)?;
            self.counters.add_skipped(changes.skipped.len() as u64);
            (changes.batch, changes.records, Some(changes.kinds))
        } else {
            let (batch, skipped) = self.values.decode(values, skip).map_err(malformed)?;
            self.counters.add_skipped(skipped.len() as u64);
            let kept = (0..records.len())
                .filter(|i| !skipped.contains(i))
                .collect();
            (batch, kept, None)
        };
        let kept: Vec<&Polled> = rows_of.iter().map(|&i| &records[i]).collect();
        if kept.is_empty() {
            return Ok(None);
        }
        // The declared columns, with the record timestamp where it was asked for.
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.config.schema.fields().len());
        for field in self.config.schema.fields() {
            match &self.config.timestamp {
                KafkaTimestamp::Record(c) if c == field.name() => {
                    let ms: TimestampMillisecondArray =
                        kept.iter().map(|r| r.timestamp_ms).collect();
                    columns.push(cast(&ms.with_timezone("UTC"), field.data_type())?);
                }
                _ => {
                    let column = batch.column_by_name(field.name()).ok_or_else(|| {
                        Error::plan(format!("decoded value lacks column `{}`", field.name()))
                    })?;
                    columns.push(column.clone());
                }
            }
        }
        // A changelog's row kinds follow the declared columns (and are filtered with them).
        if let Some(kinds) = kinds {
            columns.push(Arc::new(row_kind_array(kinds)));
        }
        let event_column = match &self.config.timestamp {
            KafkaTimestamp::Field(c) | KafkaTimestamp::Record(c) => c.clone(),
        };
        let index = self.config.schema.index_of(&event_column)?;
        let nanos = event_time_nanos(&columns[index])?;
        let (columns, nanos, kept) = if nanos.null_count() > 0 {
            let first = (0..nanos.len()).find(|r| nanos.is_null(*r)).unwrap_or(0);
            if !skip {
                return Err(Error::MalformedMessage {
                    location: self.location(kept[first].partition, kept[first].offset),
                    field: Some(event_column),
                    message: "the event time is missing or not a timestamp (use RFC 3339 text, or epoch milliseconds); fix the record, or set 'on_malformed' = 'skip'".into(),
                });
            }
            let valid: riffle_core::arrow::array::BooleanArray =
                (0..nanos.len()).map(|r| Some(nanos.is_valid(r))).collect();
            self.counters.add_skipped(nanos.null_count() as u64);
            let columns = columns
                .iter()
                .map(|c| filter(c, &valid))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let kept: Vec<&Polled> = kept
                .into_iter()
                .enumerate()
                .filter(|(i, _)| valid.value(*i))
                .map(|(_, r)| r)
                .collect();
            (columns, filter(&nanos, &valid)?, kept)
        } else {
            (columns, nanos, kept)
        };
        let times = nanos.as_primitive::<riffle_core::arrow::datatypes::TimestampNanosecondType>();
        for (r, t) in kept.iter().zip(times.values().iter()) {
            if let Some(p) = self.partitions.get_mut(&r.partition) {
                p.newest = p.newest.max(*t);
            }
        }
        let mut all = columns;
        all.push(nanos);
        let batch = RecordBatch::try_new(self.output.schema.clone(), all)?;
        Ok((batch.num_rows() > 0).then_some(batch))
    }
}

/// Where a record is, for error messages.
fn record_location(topic: &str, partition: i32, offset: i64) -> String {
    format!("Kafka topic `{topic}` partition {partition} offset {offset}")
}

/// A record read from the broker (its value is copied into the poll's [`Values`]).
struct Polled {
    partition: i32,
    offset: i64,
    timestamp_ms: Option<i64>,
}

impl Source for KafkaSource {
    fn poll_next(&mut self) -> Result<SourcePoll> {
        if !self.started && !self.start()? {
            return Ok(SourcePoll::Pending);
        }
        if self.config.bounded && self.partitions.values().all(PartitionPosition::done) {
            return Ok(SourcePoll::End);
        }
        // Waiting is the runtime's: it sleeps between polls that return Pending.
        if self.partitions.is_empty() {
            return Ok(SourcePoll::Pending);
        }
        let mut limit = self.config.batch_rows;
        if let Some(rate) = self.config.max_records_per_second {
            // This subtask's share of the rate.
            let share = (rate as f64 / self.parallelism as f64).max(1.0);
            let (started, read) = *self.throttle.get_or_insert((Instant::now(), 0));
            let allowed = (started.elapsed().as_secs_f64() * share) as u64;
            if read >= allowed {
                return Ok(SourcePoll::Pending);
            }
            limit = limit.min((allowed - read) as usize).max(1);
        }
        let mut records = Vec::new();
        let mut values = Values::default();
        // An upsert topic's record keys (tombstones name what they delete by them).
        let mut keys = Values::default();
        let mut wait = Duration::from_millis(50);
        while records.len() < limit {
            let Some(message) = self.consumer.poll(wait) else {
                break;
            };
            wait = Duration::ZERO;
            let message = match message {
                Ok(message) => message,
                Err(e) => match poll_error(e.rdkafka_error_code()) {
                    PollError::Passing => {
                        // The client reconnects by itself; reading goes on.
                        tracing::warn!(topic = %self.config.topic, "reading the topic: {e}");
                        break;
                    }
                    PollError::OffsetGone => {
                        return Err(self.config.client.error(format!(
                            "reading topic `{}`: {e}: an offset this job must read from is no longer in the topic (retention removed it, or the topic was made anew), so the records in between cannot be read; to go on without them, start from empty state (--no-restore) or from the topic's current offsets",
                            self.config.topic
                        )))
                    }
                    PollError::Fatal => {
                        return Err(self
                            .config
                            .client
                            .error(format!("reading topic `{}`: {e}", self.config.topic)))
                    }
                },
            };
            let partition = message.partition();
            let offset = message.offset();
            let Some(position) = self.partitions.get_mut(&partition) else {
                continue;
            };
            // Past a bounded end, or a record already read (a broker re-delivery).
            if position.done() || offset < position.next {
                continue;
            }
            position.next = offset + 1;
            records.push(Polled {
                partition,
                offset,
                timestamp_ms: message.timestamp().to_millis(),
            });
            values.push(message.payload());
            if self.upsert.is_some() {
                keys.push(message.key());
            }
        }
        if let Some((_, read)) = &mut self.throttle {
            *read += records.len() as u64;
        }
        self.report_pending();
        let now = Instant::now();
        if self.idle_timeout().is_some() {
            // Records come in runs per partition: one update per run, not per record.
            for run in records.chunk_by(|a, b| a.partition == b.partition) {
                self.last_delivery.insert(run[0].partition, now);
                self.caught_up.remove(&run[0].partition);
            }
        }
        if records.len() < limit {
            self.skip_invisible_offsets()?;
            self.drained_at = Some(now);
            if let Some(timeout) = self.idle_timeout() {
                self.ask_quiet_partitions(timeout, now);
            }
        }
        if records.is_empty() {
            return Ok(SourcePoll::Pending);
        }
        Ok(match self.decode_batch(records, &values, &keys)? {
            Some(batch) => SourcePoll::Batch(batch),
            None => SourcePoll::Pending,
        })
    }

    fn event_time_frontier(&self) -> Option<EventTime> {
        let now = Instant::now();
        // Idle: quiet for the timeout although nothing of it waits in the fetched
        // records (a partition behind on a backlog is not idle).
        let idle = |p: &i32| match (
            self.idle_timeout(),
            self.last_delivery.get(p),
            self.drained_at,
        ) {
            (Some(timeout), Some(at), Some(drained)) => {
                drained >= *at
                    && now.duration_since(*at) >= timeout
                    && self
                        .caught_up
                        .get(p)
                        .is_some_and(|(_, caught_up)| *caught_up)
            }
            _ => false,
        };
        let live: Vec<EventTime> = self
            .partitions
            .iter()
            .filter(|(id, p)| !p.done() && !idle(id))
            .map(|(_, p)| p.newest)
            .collect();
        if live.is_empty() {
            return self.partitions.values().map(|p| p.newest).max();
        }
        live.into_iter().min()
    }

    fn snapshot(&mut self, epoch: Epoch) -> Result<OperatorState> {
        // Before the first poll, the restored positions of this subtask's partitions are
        // still the truth; the other partitions' (after a rescale every subtask restores
        // them all) are their readers' to write, and would go stale here.
        let mine: BTreeMap<i32, PartitionPosition>;
        let positions = if self.started {
            &self.partitions
        } else {
            mine = (self.restored.iter())
                .filter(|(p, _)| (**p as usize) % self.parallelism == self.subtask)
                .map(|(p, position)| (*p, *position))
                .collect();
            &mine
        };
        let batch = encode_positions(&self.config.topic, positions)?;
        self.snapshots.push_back((
            epoch,
            positions.iter().map(|(p, pos)| (*p, pos.next)).collect(),
        ));
        while self.snapshots.len() > 16 {
            self.snapshots.pop_front();
        }
        Ok(OperatorState::of(vec![batch]))
    }

    fn restore(&mut self, state: OperatorState) -> Result<()> {
        self.restored = decode_positions(&state, &self.config.topic)?;
        Ok(())
    }

    fn on_checkpoint_complete(&mut self, epoch: Epoch) -> Result<()> {
        let mut newest = None;
        while self.snapshots.front().is_some_and(|(e, _)| *e <= epoch) {
            newest = self.snapshots.pop_front();
        }
        let (Some((_, offsets)), Some(_)) = (newest, &self.config.group_id) else {
            return Ok(());
        };
        if offsets.is_empty() {
            return Ok(());
        }
        let mut list = TopicPartitionList::new();
        for (p, next) in offsets {
            list.add_partition_offset(&self.config.topic, p, Offset::Offset(next))
                .map_err(|e| self.config.client.error(e))?;
        }
        // Advisory only (the checkpoint holds the truth): a failed commit is logged,
        // never a reason to fail the job.
        if let Err(e) = self.consumer.commit(&list, CommitMode::Async) {
            tracing::warn!(
                "committing consumer-group offsets of `{}`: {e}",
                self.config.topic
            );
        }
        Ok(())
    }
}
