//! The Nexmark source: blocks of events built straight into Arrow columns.

use super::columns::Columns;
use super::config::NexmarkConfig;
use super::generate::{EventGenerator, EventKind};
use super::schema::NexmarkTable;
use riffle_core::arrow::array::{UInt16Array, UInt64Array};
use riffle_core::arrow::datatypes::{DataType, Field, Schema};
use riffle_core::state::KEY_GROUP_FIELD;
use riffle_core::{
    Error, OperatorContext, OperatorState, RecordBatch, Result, Source, SourceFactory, SourcePoll,
    StreamSchema,
};
use std::sync::Arc;

/// Builds Nexmark source subtasks producing one table.
pub struct NexmarkSourceFactory {
    table: NexmarkTable,
    schema: StreamSchema,
    generator: Arc<EventGenerator>,
    /// Per text column, in schema order: whether the pipeline reads it.
    texts_read: Arc<[bool]>,
}

impl NexmarkSourceFactory {
    /// A source of `table` rows from the events `config` describes.
    pub fn new(table: NexmarkTable, config: NexmarkConfig) -> Self {
        Self::with_generator(table, Arc::new(EventGenerator::new(config)))
    }

    /// A source sharing an existing generator (several tables of one run).
    pub fn with_generator(table: NexmarkTable, generator: Arc<EventGenerator>) -> Self {
        let schema = table.schema();
        let texts_read = vec![true; text_columns(&schema).count()].into();
        Self {
            table,
            schema,
            generator,
            texts_read,
        }
    }
}

/// The schema indices of the text columns, in order.
fn text_columns(schema: &StreamSchema) -> impl Iterator<Item = usize> + '_ {
    (0..schema.schema.fields().len())
        .filter(|&i| schema.schema.field(i).data_type() == &DataType::Utf8)
}

impl SourceFactory for NexmarkSourceFactory {
    fn describe(&self) -> String {
        let config = self.generator.config();
        let events = config
            .events
            .map_or_else(|| "unbounded".to_string(), |n| format!("{n} events"));
        format!(
            "nexmark({}, {events}, {} events/s of event time)",
            self.table.name(),
            config.first_event_rate
        )
    }

    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }

    /// A text column no query reads is left empty: copying `url` and `extra` into
    /// every batch was a third of Nexmark q0's time. The events drawn are the same, so
    /// the columns that are read hold the same values. (The columns are NOT NULL, so
    /// they hold empty strings rather than NULLs.)
    fn reading_only(&self, used: &[usize]) -> Option<Arc<dyn SourceFactory>> {
        let texts_read: Arc<[bool]> = text_columns(&self.schema)
            .map(|i| used.contains(&i))
            .collect();
        if texts_read.iter().all(|r| *r) {
            return None;
        }
        Some(Arc::new(Self {
            table: self.table,
            schema: self.schema.clone(),
            generator: self.generator.clone(),
            texts_read,
        }))
    }

    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Source>> {
        if self.generator.config().block_events == 0 {
            return Err(Error::config("block_events", "must be at least 1"));
        }
        Ok(Box::new(NexmarkSource {
            table: self.table,
            schema: self.schema.clone(),
            generator: self.generator.clone(),
            subtask: ctx.subtask as u64,
            parallelism: ctx.parallelism as u64,
            next_block: ctx.subtask as u64,
            done_below: Vec::new(),
            throttle: None,
            texts_read: self.texts_read.clone(),
        }))
    }

    fn can_rescale(&self) -> bool {
        true
    }
}

/// "Blocks `≡ residue (mod modulus)` below `next` were produced": what a checkpoint of
/// any parallelism says about progress. A restored subtask skips every block such a
/// row covers, so a job restored at another parallelism produces each block once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DoneBelow {
    modulus: u64,
    residue: u64,
    next: u64,
}

impl DoneBelow {
    fn covers(&self, block: u64) -> bool {
        block % self.modulus == self.residue && block < self.next
    }
}

/// One subtask: blocks `subtask, subtask + p, subtask + 2p, …`, minus those a restored
/// checkpoint taken at another parallelism had already produced.
struct NexmarkSource {
    table: NexmarkTable,
    schema: StreamSchema,
    generator: Arc<EventGenerator>,
    subtask: u64,
    parallelism: u64,
    next_block: u64,
    /// Progress inherited from a checkpoint at another parallelism.
    done_below: Vec<DoneBelow>,
    /// With a wall-clock rate: when this subtask started and blocks produced since.
    throttle: Option<(std::time::Instant, u64)>,
    texts_read: Arc<[bool]>,
}

impl Source for NexmarkSource {
    fn poll_next(&mut self) -> Result<SourcePoll> {
        if let Some(rate) = self.generator.config().max_events_per_second {
            // This subtask's share of the rate, in blocks.
            let (started, produced) = *self
                .throttle
                .get_or_insert_with(|| (std::time::Instant::now(), 0));
            let per_block = (self.generator.config().block_events * self.parallelism) as f64;
            let allowed = started.elapsed().as_secs_f64() * rate as f64 / per_block;
            if produced as f64 >= allowed.max(1.0) {
                return Ok(SourcePoll::Pending);
            }
            self.throttle = Some((started, produced + 1));
        }
        while self.done_below.iter().any(|d| d.covers(self.next_block)) {
            self.next_block += self.parallelism;
        }
        let config = self.generator.config();
        let start = self.next_block * config.block_events;
        let end = match config.events {
            Some(total) if start >= total => return Ok(SourcePoll::End),
            Some(total) => (start + config.block_events).min(total),
            None => start + config.block_events,
        };
        self.next_block += self.parallelism;
        let batch = match self.table {
            NexmarkTable::Bid => self.build(start, end, EventKind::Bid, Columns::bids)?,
            NexmarkTable::Auction => {
                self.build(start, end, EventKind::Auction, Columns::auctions)?
            }
            NexmarkTable::Person => self.build(start, end, EventKind::Person, Columns::persons)?,
        };
        Ok(SourcePoll::Batch(batch))
    }

    /// One row per progress fact: this subtask's own (`next_block`, `parallelism`,
    /// `subtask`), then inherited ones that still exclude blocks ahead of it.
    fn snapshot(&mut self, _epoch: riffle_core::Epoch) -> Result<OperatorState> {
        let schema = Arc::new(Schema::new(vec![
            Field::new(KEY_GROUP_FIELD, DataType::UInt16, false),
            Field::new("next_block", DataType::UInt64, false),
            Field::new("parallelism", DataType::UInt64, false),
            Field::new("subtask", DataType::UInt64, false),
        ]));
        let mut rows = vec![DoneBelow {
            modulus: self.parallelism,
            residue: self.subtask,
            next: self.next_block,
        }];
        rows.extend(
            self.done_below
                .iter()
                .filter(|d| d.next > self.next_block)
                .copied(),
        );
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(UInt16Array::from(vec![0u16; rows.len()])),
                Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.next))),
                Arc::new(UInt64Array::from_iter_values(
                    rows.iter().map(|r| r.modulus),
                )),
                Arc::new(UInt64Array::from_iter_values(
                    rows.iter().map(|r| r.residue),
                )),
            ],
        )?;
        Ok(OperatorState::of(vec![batch]))
    }

    /// At the checkpoint's parallelism the state is this subtask's own; at another, it
    /// is every old subtask's, and this subtask skips whatever they had produced.
    fn restore(&mut self, state: OperatorState) -> Result<()> {
        let bad = |message: &str| Error::State {
            operator: format!("nexmark({})", self.table.name()),
            message: message.into(),
        };
        let column = |batch: &RecordBatch, name: &str| -> Result<UInt64Array> {
            batch
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
                .cloned()
                .ok_or_else(|| bad(&format!("missing UInt64 column `{name}`")))
        };
        let mut facts = Vec::new();
        for batch in &state.batches {
            let next = column(batch, "next_block")?;
            let modulus = column(batch, "parallelism")?;
            // Checkpoints before the `subtask` column: one row, the subtask's own. Which
            // subtask wrote it is known only when the parallelism is the same and this
            // batch is the only one (such checkpoints predate restores at another one).
            let residue = match column(batch, "subtask") {
                Ok(r) => r,
                Err(_) if state.batches.len() == 1
                    && modulus.iter().all(|m| m == Some(self.parallelism)) =>
                {
                    UInt64Array::from(vec![self.subtask; batch.num_rows()])
                }
                Err(_) => {
                    return Err(bad(
                        "this checkpoint was written by an older riffle, before a Nexmark source could restore at another parallelism: restore it at the parallelism it was taken at",
                    ))
                }
            };
            for i in 0..batch.num_rows() {
                if modulus.value(i) == 0 {
                    return Err(bad("parallelism 0 in the checkpoint"));
                }
                facts.push(DoneBelow {
                    modulus: modulus.value(i),
                    residue: residue.value(i),
                    next: next.value(i),
                });
            }
        }
        if facts.is_empty() {
            return Err(bad("no offset row"));
        }
        self.next_block = self.subtask;
        self.done_below = facts;
        Ok(())
    }
}

impl NexmarkSource {
    fn build(
        &self,
        start: u64,
        end: u64,
        kind: EventKind,
        make: fn(usize, &[bool]) -> Columns,
    ) -> Result<RecordBatch> {
        let rows = (start..end).filter(|e| EventKind::of(*e) == kind).count();
        let mut columns = make(rows, &self.texts_read);
        for e in start..end {
            if EventKind::of(e) == kind {
                self.generator.generate(e, &mut columns);
            }
        }
        Ok(RecordBatch::try_new(
            self.schema.schema.clone(),
            columns.finish(),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::AsArray;
    use riffle_core::arrow::datatypes::Int64Type;

    fn drain(source: &mut dyn Source) -> Vec<RecordBatch> {
        let mut out = Vec::new();
        while let SourcePoll::Batch(b) = source.poll_next().unwrap() {
            out.push(b);
        }
        out
    }

    fn prices(batches: &[RecordBatch]) -> Vec<i64> {
        let mut v: Vec<i64> = batches
            .iter()
            .flat_map(|b| b.column(2).as_primitive::<Int64Type>().values().to_vec())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn text_columns_no_query_reads_are_left_empty_and_the_rest_unchanged() {
        let config = NexmarkConfig {
            events: Some(5_000),
            block_events: 500,
            ..Default::default()
        };
        for table in [
            NexmarkTable::Bid,
            NexmarkTable::Auction,
            NexmarkTable::Person,
        ] {
            let whole = NexmarkSourceFactory::new(table, config.clone());
            let schema = whole.output_schema().schema.clone();
            let texts: Vec<usize> = text_columns(whole.output_schema()).collect();
            // Every column but the first text one, then every column but `extra` (the
            // last text, which the generator then does not draw).
            let all = drain(
                whole
                    .create(&OperatorContext::detached("n", 0, 1))
                    .unwrap()
                    .as_mut(),
            );
            assert!(whole
                .reading_only(&(0..schema.fields().len()).collect::<Vec<_>>())
                .is_none());
            for skip in [texts[0], texts[texts.len() - 1]] {
                let used: Vec<usize> = (0..schema.fields().len()).filter(|i| *i != skip).collect();
                let partial = whole.reading_only(&used).unwrap();
                let some = drain(
                    partial
                        .create(&OperatorContext::detached("n", 0, 1))
                        .unwrap()
                        .as_mut(),
                );
                assert_eq!(all.len(), some.len());
                for (a, b) in all.iter().zip(&some) {
                    for &i in &used {
                        assert_eq!(a.column(i), b.column(i), "{table:?} column {i}");
                    }
                    let skipped = b.column(skip).as_string::<i32>();
                    assert!(skipped.iter().all(|v| v == Some("")), "{table:?}");
                    assert!(a
                        .column(skip)
                        .as_string::<i32>()
                        .iter()
                        .any(|v| v != Some("")));
                }
            }
        }
    }

    #[test]
    fn parallel_subtasks_produce_the_single_subtask_output() {
        let config = NexmarkConfig {
            events: Some(30_000),
            block_events: 1000,
            ..Default::default()
        };
        let factory = NexmarkSourceFactory::new(NexmarkTable::Bid, config);
        let single = drain(
            factory
                .create(&OperatorContext::detached("nexmark", 0, 1))
                .unwrap()
                .as_mut(),
        );
        let mut split = drain(
            factory
                .create(&OperatorContext::detached("nexmark", 0, 3))
                .unwrap()
                .as_mut(),
        );
        split.extend(drain(
            factory
                .create(&OperatorContext::detached("nexmark", 1, 3))
                .unwrap()
                .as_mut(),
        ));
        split.extend(drain(
            factory
                .create(&OperatorContext::detached("nexmark", 2, 3))
                .unwrap()
                .as_mut(),
        ));
        assert_eq!(prices(&single).len(), 30_000 / 50 * 46);
        assert_eq!(prices(&single), prices(&split));
    }

    #[test]
    fn restore_replays_from_the_offset() {
        let config = NexmarkConfig {
            events: Some(10_000),
            block_events: 1000,
            ..Default::default()
        };
        let factory = NexmarkSourceFactory::new(NexmarkTable::Auction, config);
        let mut a = factory
            .create(&OperatorContext::detached("nexmark", 0, 1))
            .unwrap();
        a.poll_next().unwrap();
        a.poll_next().unwrap();
        let offset = a.snapshot(riffle_core::Epoch(1)).unwrap();
        let rest = drain(a.as_mut());
        let mut b = factory
            .create(&OperatorContext::detached("nexmark", 0, 1))
            .unwrap();
        b.restore(offset).unwrap();
        let replayed = drain(b.as_mut());
        assert_eq!(rest, replayed);
    }

    /// A checkpoint of an older riffle: `next_block` and `parallelism`, no `subtask`.
    fn old_state(next: u64, parallelism: u64) -> OperatorState {
        use riffle_core::arrow::datatypes::{DataType, Field, Schema};
        let schema = Schema::new(vec![
            Field::new("next_block", DataType::UInt64, false),
            Field::new("parallelism", DataType::UInt64, false),
        ]);
        let batch = RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(UInt64Array::from(vec![next])),
                Arc::new(UInt64Array::from(vec![parallelism])),
            ],
        )
        .unwrap();
        OperatorState::of(vec![batch])
    }

    #[test]
    fn an_older_checkpoint_restores_at_its_own_parallelism_only() {
        let factory = NexmarkSourceFactory::new(NexmarkTable::Auction, NexmarkConfig::default());
        let at = |subtask, parallelism| {
            factory
                .create(&OperatorContext::detached("nexmark", subtask, parallelism))
                .unwrap()
        };
        assert!(at(1, 2).restore(old_state(9, 2)).is_ok());
        // At p3, which old subtask wrote a row is unknown: its blocks would be taken
        // for this subtask's (some produced twice, some never).
        let refused = at(1, 3).restore(old_state(9, 2));
        assert!(matches!(refused, Err(Error::State { .. })), "{refused:?}");
        let two = OperatorState::of(
            [old_state(10, 2), old_state(6, 2)]
                .into_iter()
                .flat_map(|s| s.batches)
                .collect(),
        );
        assert!(at(0, 2).restore(two).is_err(), "two old subtasks' rows");
    }

    #[test]
    fn columns_match_the_plain_event_api() {
        let config = NexmarkConfig {
            events: Some(2000),
            block_events: 2000,
            ..Default::default()
        };
        let generator = Arc::new(EventGenerator::new(config));
        let factory = NexmarkSourceFactory::with_generator(NexmarkTable::Person, generator.clone());
        let batches = drain(
            factory
                .create(&OperatorContext::detached("nexmark", 0, 1))
                .unwrap()
                .as_mut(),
        );
        let ids = batches[0].column(0).as_primitive::<Int64Type>();
        let names = batches[0].column(1).as_string::<i32>();
        assert_eq!(ids.len(), 40);
        match generator.event(50) {
            super::super::events::Event::Person(p) => {
                assert_eq!(ids.value(1), p.id);
                assert_eq!(names.value(1), p.name);
            }
            other => panic!("{other:?}"),
        }
    }
}
