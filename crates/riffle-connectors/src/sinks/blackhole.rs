//! A sink that counts rows and keeps nothing (benchmarks).

use riffle_core::{RecordBatch, Result, Sink, SinkContext, SinkFactory, SinkSummary, StreamSchema};

/// Builds blackhole sinks.
#[derive(Debug, Default)]
pub struct BlackholeSinkFactory;

impl SinkFactory for BlackholeSinkFactory {
    fn describe(&self) -> String {
        "blackhole".into()
    }

    fn create(&self, _: &StreamSchema, _: &SinkContext) -> Result<Box<dyn Sink>> {
        Ok(Box::new(BlackholeSink { rows: 0 }))
    }
}

struct BlackholeSink {
    rows: u64,
}

impl Sink for BlackholeSink {
    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    fn finish(&mut self) -> Result<SinkSummary> {
        Ok(SinkSummary {
            rows: self.rows,
            files: Vec::new(),
        })
    }
}
