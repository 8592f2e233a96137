//! Decoding text records (JSON objects, CSV lines) into Arrow, and event-time columns
//! into nanoseconds; shared by the file and Kafka sources, which differ only in how
//! they name a bad record (file and line, or topic, partition and offset).

use crate::sinks::FileFormat;
use riffle_core::arrow::array::{Array, ArrayRef, AsArray};
use riffle_core::arrow::compute::is_not_null;
use riffle_core::arrow::compute::kernels::cast::{cast_with_options, CastOptions};
use riffle_core::arrow::compute::kernels::zip::zip;
use riffle_core::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use riffle_core::{timestamp_type, Error, RecordBatch, Result};
use std::sync::Arc;

/// Decodes `rows` records of `format` (JSONL or CSV without header) from `text`.
///
/// A TIMESTAMP column takes a number as epoch milliseconds (as Flink reads it) and text
/// as a date-time (RFC 3339 / ISO 8601, to the nanosecond), value by value: the column
/// is decoded as text first, so a JSON number keeps its digits. (Arrow's JSON decoder
/// would take a number as a count of the column's unit, nanoseconds.) Hence JSON
/// numbers and booleans in VARCHAR columns are read as their text too, as Flink does.
pub(crate) fn decode(
    format: FileFormat,
    schema: &SchemaRef,
    text: &[u8],
    rows: usize,
) -> std::result::Result<Option<RecordBatch>, String> {
    let timestamps: Vec<usize> = schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| matches!(f.data_type(), DataType::Timestamp(..)))
        .map(|(i, _)| i)
        .collect();
    if timestamps.is_empty() {
        return decode_as(format, schema, text, rows);
    }
    let as_text: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Timestamp(..) => f.as_ref().clone().with_data_type(DataType::Utf8),
            _ => f.as_ref().clone(),
        })
        .collect();
    let as_text = Arc::new(Schema::new_with_metadata(
        as_text,
        schema.metadata().clone(),
    ));
    let Some(batch) = decode_as(format, &as_text, text, rows)? else {
        return Ok(None);
    };
    let mut columns = batch.columns().to_vec();
    for i in timestamps {
        let field = schema.field(i);
        columns[i] = timestamp_from_text(&columns[i], field)?;
    }
    RecordBatch::try_new(schema.clone(), columns)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// Epoch milliseconds (an Int64 column) as timestamps of type `target`, through a
/// millisecond timestamp so that each unit converts exactly; a value past `target`'s
/// range becomes NULL.
fn epoch_millis_as(
    millis: &ArrayRef,
    target: &DataType,
) -> std::result::Result<ArrayRef, riffle_core::arrow::error::ArrowError> {
    let safe = CastOptions {
        safe: true,
        ..Default::default()
    };
    let zone = match target {
        DataType::Timestamp(_, zone) => zone.clone(),
        _ => None,
    };
    let as_millis = cast_with_options(
        millis,
        &DataType::Timestamp(TimeUnit::Millisecond, zone),
        &safe,
    )?;
    cast_with_options(&as_millis, target, &safe)
}

/// A text column as the TIMESTAMP `field`: each value epoch milliseconds when it is an
/// integer, else a date-time; the error names the field and the value.
fn timestamp_from_text(column: &ArrayRef, field: &Field) -> std::result::Result<ArrayRef, String> {
    let safe = CastOptions {
        safe: true,
        ..Default::default()
    };
    let target = field.data_type();
    let millis = cast_with_options(column, &DataType::Int64, &safe).map_err(|e| e.to_string())?;
    // (A value past the column unit's range becomes NULL, reported below.)
    let from_millis = epoch_millis_as(&millis, target).map_err(|e| e.to_string())?;
    let from_text = cast_with_options(column, target, &safe).map_err(|e| e.to_string())?;
    let is_millis = is_not_null(&millis).map_err(|e| e.to_string())?;
    let values = zip(&is_millis, &from_millis, &from_text).map_err(|e| e.to_string())?;
    let text = column.as_string::<i32>();
    if let Some(bad) = (0..column.len()).find(|i| column.is_valid(*i) && values.is_null(*i)) {
        return Err(format!(
            "field '{}': `{}` is neither epoch milliseconds (in range) nor a date-time (e.g. 2025-01-31T12:00:00Z)",
            field.name(),
            text.value(bad)
        ));
    }
    Ok(values)
}

fn decode_as(
    format: FileFormat,
    schema: &SchemaRef,
    text: &[u8],
    rows: usize,
) -> std::result::Result<Option<RecordBatch>, String> {
    match format {
        FileFormat::Jsonl => {
            let mut d = riffle_core::arrow::json::ReaderBuilder::new(schema.clone())
                .with_coerce_primitive(true)
                .with_batch_size(rows.max(1))
                .build_decoder()
                .map_err(|e| e.to_string())?;
            d.decode(text).map_err(|e| e.to_string())?;
            d.flush().map_err(|e| e.to_string())
        }
        _ => {
            let mut d = riffle_core::arrow::csv::ReaderBuilder::new(schema.clone())
                .with_header(false)
                .with_batch_size(rows.max(1))
                .build_decoder();
            let mut rest = text;
            while !rest.is_empty() {
                let n = d.decode(rest).map_err(|e| e.to_string())?;
                if n == 0 {
                    break;
                }
                rest = &rest[n..];
            }
            d.flush().map_err(|e| e.to_string())
        }
    }
}

/// The field an Arrow decoding error names, if any.
pub(crate) fn field_of(message: &str, schema: &Schema) -> Option<String> {
    if let Some(rest) = message.split("field '").nth(1) {
        return rest.split('\'').next().map(str::to_string);
    }
    // CSV errors name the column by index: "... for column 2 at line ...".
    let column: usize = message
        .split("for column ")
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    schema.fields().get(column).map(|f| f.name().clone())
}

/// An event-time column as UTC nanoseconds: epoch milliseconds (BIGINT), timestamps,
/// dates, or RFC 3339 text; values that are not a time become NULL.
///
/// # Errors
/// The column's type cannot be a time.
pub(crate) fn event_time_nanos(column: &ArrayRef) -> Result<ArrayRef> {
    let safe = CastOptions {
        safe: true,
        ..Default::default()
    };
    let nanos: ArrayRef = match column.data_type() {
        DataType::Int64 => epoch_millis_as(column, &timestamp_type())?,
        DataType::Timestamp(_, _) | DataType::Utf8 | DataType::LargeUtf8 | DataType::Date32 => {
            cast_with_options(
                column,
                &DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
                &safe,
            )?
        }
        other => {
            return Err(Error::config(
                "event_time_column",
                format!("{other} cannot be event time"),
            ))
        }
    };
    Ok(nanos)
}
