//! Event time end to end: late rows are dropped and counted, and an idle source does
//! not hold back the watermark.

use crate::common;

use common::runtime;
use riffle_connectors::sinks::CollectSinkFactory;
use riffle_core::arrow::array::{Int64Array, TimestampNanosecondArray};
use riffle_core::arrow::datatypes::{DataType, Field};
use riffle_core::{
    OperatorContext, RecordBatch, Result, Source, SourceFactory, SourcePoll, StreamSchema,
};
use riffle_operators::{AggregateSpec, WindowAggregateFactory, WindowSpec};
use riffle_runtime::job::{self, JobConfig};
use riffle_runtime::{JobGraph, WatermarkStrategy};
use std::sync::Arc;
use std::time::Duration;

/// Emits two batches: on time, then one with rows far behind the watermark.
struct LateSource {
    schema: StreamSchema,
}

impl SourceFactory for LateSource {
    fn describe(&self) -> String {
        "late".into()
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn create(&self, _: &OperatorContext) -> Result<Box<dyn Source>> {
        Ok(Box::new(LateSourceTask {
            schema: self.schema.clone(),
            step: 0,
        }))
    }
}

struct LateSourceTask {
    schema: StreamSchema,
    step: u8,
}

impl Source for LateSourceTask {
    fn poll_next(&mut self) -> Result<SourcePoll> {
        let second = 1_000_000_000i64;
        let times: Vec<i64> = match self.step {
            0 => vec![0, second, 30 * second],
            1 => vec![2 * second, 3 * second, 29 * second],
            _ => return Ok(SourcePoll::End),
        };
        self.step += 1;
        let n = times.len();
        let batch = RecordBatch::try_new(
            self.schema.schema.clone(),
            vec![
                Arc::new(Int64Array::from(vec![1; n])),
                Arc::new(TimestampNanosecondArray::from(times).with_timezone("UTC")),
            ],
        )?;
        Ok(SourcePoll::Batch(batch))
    }
}

#[test]
fn late_rows_are_dropped_and_counted() {
    let schema = StreamSchema::with_timestamp(vec![Field::new("k", DataType::Int64, false)]);
    let mut g = JobGraph::new("late");
    let strategy = WatermarkStrategy {
        max_out_of_orderness: Duration::from_secs(5),
        idle_timeout: None,
    };
    let src = g
        .source("late", Arc::new(LateSource { schema }), 1, strategy)
        .unwrap();
    let window = WindowAggregateFactory::new(
        g.schema(src),
        &["k"],
        WindowSpec::tumbling(Duration::from_secs(10)),
        vec![AggregateSpec::count_star("n")],
    )
    .unwrap();
    let w = g.operator("window", Arc::new(window), 1, &[src]).unwrap();
    let sink = CollectSinkFactory::new();
    g.sink("sink", Arc::new(sink.clone()), 1, w).unwrap();
    let summary = runtime()
        .block_on(job::run(&g, &JobConfig::default()))
        .unwrap();
    // The watermark after batch 1 is 25 s: window [0, 10) has fired, so the rows at 2 s
    // and 3 s are late; the row at 29 s is on time.
    assert_eq!(summary.late_rows_dropped(), 2);
    let window_totals = summary
        .operators
        .iter()
        .find(|o| o.operator.0 == "window")
        .unwrap();
    assert_eq!(window_totals.late_rows_dropped, 2);
    let counts: Vec<i64> = sink
        .batches()
        .iter()
        .flat_map(|b| {
            b.column_by_name("n")
                .unwrap()
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect();
    // [0, 10) keeps its 2 on-time rows; 29 s lands in [20, 30) and 30 s in [30, 40).
    assert_eq!(counts, vec![2, 1, 1]);
}

/// Subtask 0 emits 60 s of event time; subtask 1 emits one row, then nothing until the
/// sink has output (or a 20 s safety timeout), then ends.
struct QuietSource {
    schema: StreamSchema,
    sink: CollectSinkFactory,
    released_by_output: Arc<std::sync::atomic::AtomicBool>,
}

impl SourceFactory for QuietSource {
    fn describe(&self) -> String {
        "quiet".into()
    }
    fn output_schema(&self) -> &StreamSchema {
        &self.schema
    }
    fn create(&self, ctx: &OperatorContext) -> Result<Box<dyn Source>> {
        Ok(Box::new(QuietTask {
            schema: self.schema.clone(),
            subtask: ctx.subtask,
            step: 0,
            started: std::time::Instant::now(),
            sink: self.sink.clone(),
            released_by_output: self.released_by_output.clone(),
        }))
    }
}

struct QuietTask {
    schema: StreamSchema,
    subtask: usize,
    step: i64,
    started: std::time::Instant,
    sink: CollectSinkFactory,
    released_by_output: Arc<std::sync::atomic::AtomicBool>,
}

impl Source for QuietTask {
    fn poll_next(&mut self) -> Result<SourcePoll> {
        let batch = |schema: &StreamSchema, t: i64| {
            RecordBatch::try_new(
                schema.schema.clone(),
                vec![
                    Arc::new(Int64Array::from(vec![1])),
                    Arc::new(TimestampNanosecondArray::from(vec![t]).with_timezone("UTC")),
                ],
            )
        };
        let second = 1_000_000_000i64;
        if self.subtask == 0 {
            self.step += 1;
            return Ok(match self.step {
                s if s <= 60 => SourcePoll::Batch(batch(&self.schema, s * second)?),
                _ => SourcePoll::End,
            });
        }
        if self.step == 0 {
            self.step = 1;
            return Ok(SourcePoll::Batch(batch(&self.schema, 0)?));
        }
        if !self.sink.batches().is_empty() {
            self.released_by_output
                .store(true, std::sync::atomic::Ordering::SeqCst);
            return Ok(SourcePoll::End);
        }
        if self.started.elapsed() > Duration::from_secs(20) {
            return Ok(SourcePoll::End);
        }
        Ok(SourcePoll::Pending)
    }
}

#[test]
fn an_idle_source_does_not_hold_back_windows() {
    let schema = StreamSchema::with_timestamp(vec![Field::new("k", DataType::Int64, false)]);
    let sink = CollectSinkFactory::new();
    let released = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let source = QuietSource {
        schema,
        sink: sink.clone(),
        released_by_output: released.clone(),
    };
    let mut g = JobGraph::new("idle");
    let strategy = WatermarkStrategy {
        max_out_of_orderness: Duration::ZERO,
        idle_timeout: Some(Duration::from_millis(50)),
    };
    let src = g.source("quiet", Arc::new(source), 2, strategy).unwrap();
    let window = WindowAggregateFactory::new(
        g.schema(src),
        &["k"],
        WindowSpec::tumbling(Duration::from_secs(10)),
        vec![AggregateSpec::count_star("n")],
    )
    .unwrap();
    let w = g.operator("window", Arc::new(window), 1, &[src]).unwrap();
    g.sink("sink", Arc::new(sink.clone()), 1, w).unwrap();
    runtime()
        .block_on(job::run(&g, &JobConfig::default()))
        .unwrap();
    assert!(
        released.load(std::sync::atomic::Ordering::SeqCst),
        "windows must fire while one source subtask is idle, not only when it ends"
    );
}
