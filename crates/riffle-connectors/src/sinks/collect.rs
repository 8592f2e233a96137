//! A sink that keeps every batch in memory, for embedding and tests.

use riffle_core::{RecordBatch, Result, Sink, SinkFactory, SinkSummary, StreamSchema};
use std::sync::{Arc, Mutex};

/// Builds sinks that append batches to one shared vector.
#[derive(Debug, Default, Clone)]
pub struct CollectSinkFactory {
    batches: Arc<Mutex<Vec<RecordBatch>>>,
}

impl CollectSinkFactory {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    /// Everything collected so far, over all subtasks.
    pub fn batches(&self) -> Vec<RecordBatch> {
        self.batches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl SinkFactory for CollectSinkFactory {
    fn describe(&self) -> String {
        "collect(memory)".into()
    }

    fn create(&self, _: &StreamSchema, _: usize, _: usize) -> Result<Box<dyn Sink>> {
        Ok(Box::new(CollectSink {
            batches: self.batches.clone(),
            rows: 0,
        }))
    }
}

struct CollectSink {
    batches: Arc<Mutex<Vec<RecordBatch>>>,
    rows: u64,
}

impl Sink for CollectSink {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.rows += batch.num_rows() as u64;
        self.batches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(batch.clone());
        Ok(())
    }

    fn finish(&mut self) -> Result<SinkSummary> {
        Ok(SinkSummary {
            rows: self.rows,
            files: Vec::new(),
        })
    }
}
