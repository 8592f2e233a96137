//! Decoding text records (JSON objects, CSV lines) into Arrow, and event-time columns
//! into nanoseconds; shared by the file and Kafka sources, which differ only in how
//! they name a bad record (file and line, or topic, partition and offset).

use crate::sinks::FileFormat;
use riffle_core::arrow::array::{ArrayRef, AsArray};
use riffle_core::arrow::compute::kernels::cast::{cast_with_options, CastOptions};
use riffle_core::arrow::compute::kernels::numeric::mul;
use riffle_core::arrow::datatypes::{DataType, Int64Type, Schema, SchemaRef, TimeUnit};
use riffle_core::{timestamp_type, Error, RecordBatch, Result};

/// Decodes `rows` records of `format` (JSONL or CSV without header) from `text`.
pub(crate) fn decode(
    format: FileFormat,
    schema: &SchemaRef,
    text: &[u8],
    rows: usize,
) -> std::result::Result<Option<RecordBatch>, String> {
    match format {
        FileFormat::Jsonl => {
            let mut d = riffle_core::arrow::json::ReaderBuilder::new(schema.clone())
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
        DataType::Int64 => {
            let ms = column.as_primitive::<Int64Type>();
            let scaled = mul(
                ms,
                &riffle_core::arrow::array::Int64Array::new_scalar(1_000_000),
            )?;
            cast_with_options(&scaled, &timestamp_type(), &safe)?
        }
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
