//! What travels on a stream between workers: Arrow IPC messages for rows and state,
//! and JSON in `app_metadata` for everything else, in one ordered stream of
//! [`FlightData`] (docs/cluster.md, "The exchange").
//!
//! A data message is an IPC record batch, preceded by an IPC schema message whenever the
//! schema differs from the last one sent. A control message has no IPC header and
//! carries its JSON in `app_metadata`, so a watermark or barrier keeps its place
//! between the batches around it.

use crate::error::{ClusterError, ClusterResult};
use arrow_flight::FlightData;
use bytes::Bytes;
use riffle_core::arrow::datatypes::{Schema, SchemaRef};
use riffle_core::arrow::ipc::writer::{
    DictionaryTracker, IpcDataGenerator, IpcWriteContext, IpcWriteOptions,
};
use riffle_core::RecordBatch;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;

/// Turns batches and control messages into the [`FlightData`] of one stream.
pub struct StreamEncoder {
    generator: IpcDataGenerator,
    options: IpcWriteOptions,
    context: IpcWriteContext,
    dictionaries: DictionaryTracker,
    schema: Option<SchemaRef>,
}

impl Default for StreamEncoder {
    fn default() -> Self {
        Self {
            generator: IpcDataGenerator::default(),
            options: IpcWriteOptions::default(),
            context: IpcWriteContext::default(),
            dictionaries: DictionaryTracker::new(false),
            schema: None,
        }
    }
}

impl StreamEncoder {
    /// The messages that carry `batch`: its schema first if it is new on this stream.
    ///
    /// # Errors
    /// The batch cannot be encoded, or has dictionary columns (which do not cross
    /// workers yet: the error names the schema).
    pub fn batch(&mut self, batch: &RecordBatch) -> ClusterResult<Vec<FlightData>> {
        let mut out = Vec::with_capacity(2);
        if self.schema.as_ref() != Some(batch.schema_ref()) {
            let schema = self.generator.schema_to_bytes_with_dictionary_tracker(
                batch.schema_ref(),
                &mut self.dictionaries,
                &self.options,
            );
            out.push(FlightData::from(schema));
            self.schema = Some(batch.schema());
        }
        let (dictionaries, encoded) = self
            .generator
            .encode(
                batch,
                &mut self.dictionaries,
                &self.options,
                &mut self.context,
            )
            .map_err(ClusterError::Encode)?;
        if !dictionaries.is_empty() {
            return Err(ClusterError::Unsupported(format!(
                "dictionary-encoded columns cannot cross workers yet (schema {})",
                batch.schema()
            )));
        }
        out.push(FlightData::from(encoded));
        Ok(out)
    }

    /// A control message: `value` as JSON, with no IPC payload.
    ///
    /// # Errors
    /// `value` cannot be written as JSON.
    pub fn control<T: Serialize>(&self, value: &T) -> ClusterResult<FlightData> {
        let json = serde_json::to_vec(value).map_err(ClusterError::Json)?;
        Ok(FlightData {
            app_metadata: Bytes::from(json),
            ..FlightData::default()
        })
    }
}

/// One decoded message of a stream.
#[derive(Debug)]
pub enum Decoded<T> {
    /// Rows.
    Batch(RecordBatch),
    /// A control message.
    Control(T),
}

/// Reads the [`FlightData`] of one stream back into batches and control messages.
#[derive(Default)]
pub struct StreamDecoder {
    schema: Option<SchemaRef>,
}

impl StreamDecoder {
    /// Decodes one message; a schema message yields nothing (it shapes later batches).
    ///
    /// # Errors
    /// A malformed message, a batch before any schema, or control JSON of another shape.
    pub fn decode<T: DeserializeOwned>(
        &mut self,
        data: &FlightData,
    ) -> ClusterResult<Option<Decoded<T>>> {
        if data.data_header.is_empty() {
            let value = serde_json::from_slice(&data.app_metadata).map_err(ClusterError::Json)?;
            return Ok(Some(Decoded::Control(value)));
        }
        let message = riffle_core::arrow::ipc::root_as_message(&data.data_header[..])
            .map_err(|e| ClusterError::Protocol(format!("not an IPC message: {e}")))?;
        match message.header_type() {
            riffle_core::arrow::ipc::MessageHeader::Schema => {
                let schema = Schema::try_from(data).map_err(ClusterError::Encode)?;
                self.schema = Some(Arc::new(schema));
                Ok(None)
            }
            riffle_core::arrow::ipc::MessageHeader::RecordBatch => {
                let schema = self.schema.clone().ok_or_else(|| {
                    ClusterError::Protocol("a record batch arrived before its schema".into())
                })?;
                let batch =
                    arrow_flight::utils::flight_data_to_arrow_batch(data, schema, &HashMap::new())
                        .map_err(ClusterError::Encode)?;
                Ok(Some(Decoded::Batch(batch)))
            }
            other => Err(ClusterError::Protocol(format!(
                "unexpected IPC message {other:?} between workers"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use riffle_core::arrow::array::{Int64Array, StringArray};
    use riffle_core::arrow::datatypes::{DataType, Field};

    fn batch(values: &[i64]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("v", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
        ]));
        let strings: Vec<Option<String>> = values
            .iter()
            .map(|v| (v % 2 == 0).then(|| format!("s{v}")))
            .collect();
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(values.to_vec())),
                Arc::new(StringArray::from(strings)),
            ],
        )
        .unwrap()
    }

    #[test]
    fn batches_and_control_messages_come_back_in_their_order() {
        let mut encoder = StreamEncoder::default();
        let mut wire = encoder.batch(&batch(&[1, 2, 3])).unwrap();
        assert_eq!(wire.len(), 2, "schema, then the batch");
        wire.push(encoder.control(&"between").unwrap());
        let second = encoder.batch(&batch(&[4])).unwrap();
        assert_eq!(second.len(), 1, "the schema is sent once");
        wire.extend(second);

        let mut decoder = StreamDecoder::default();
        let decoded: Vec<Decoded<String>> = wire
            .iter()
            .filter_map(|d| decoder.decode(d).unwrap())
            .collect();
        assert_eq!(decoded.len(), 3);
        assert!(matches!(&decoded[0], Decoded::Batch(b) if *b == batch(&[1, 2, 3])));
        assert!(matches!(&decoded[1], Decoded::Control(c) if c == "between"));
        assert!(matches!(&decoded[2], Decoded::Batch(b) if *b == batch(&[4])));
    }

    #[test]
    fn a_new_schema_is_sent_before_the_batch_that_has_it() {
        let mut encoder = StreamEncoder::default();
        let mut wire = encoder.batch(&batch(&[1])).unwrap();
        let other = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("w", DataType::Utf8, false)])),
            vec![Arc::new(StringArray::from(vec!["x"]))],
        )
        .unwrap();
        let switched = encoder.batch(&other).unwrap();
        assert_eq!(switched.len(), 2);
        wire.extend(switched);
        let mut decoder = StreamDecoder::default();
        let batches: Vec<RecordBatch> = wire
            .iter()
            .filter_map(|d| match decoder.decode::<()>(d).unwrap() {
                Some(Decoded::Batch(b)) => Some(b),
                _ => None,
            })
            .collect();
        assert_eq!(batches, vec![batch(&[1]), other]);
    }

    #[test]
    fn a_batch_without_a_schema_is_a_protocol_error() {
        let mut encoder = StreamEncoder::default();
        let wire = encoder.batch(&batch(&[1])).unwrap();
        let mut decoder = StreamDecoder::default();
        let error = decoder.decode::<()>(&wire[1]).unwrap_err();
        assert!(matches!(error, ClusterError::Protocol(_)));
    }
}
