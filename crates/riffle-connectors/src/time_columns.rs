//! Timestamp columns between units and zones, and event time as UTC nanoseconds: shared
//! by the text decoder, the Parquet reader and the Kafka source.

use riffle_core::arrow::array::{make_array, Array, ArrayRef};
use riffle_core::arrow::compute::kernels::cast::{cast_with_options, CastOptions};
use riffle_core::arrow::datatypes::{DataType, TimeUnit};
use riffle_core::{timestamp_type, Error, Result};
use std::sync::Arc;

/// Epoch milliseconds (an Int64 column) as timestamps of type `target`, through a
/// millisecond timestamp so that each unit converts exactly; a value past `target`'s
/// range becomes NULL.
pub(crate) fn epoch_millis_as(
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

/// The timestamp `column` as the timestamp type `target` when both are in UTC (no zone
/// or `UTC`; riffle reads a time without a zone as UTC): only the unit changes, with
/// `options` deciding what a value past the new unit's range becomes. `None` for other
/// types or zones. (Arrow's cast between a zoned and an unzoned type looks up the
/// zone's offset value by value; for UTC that offset is zero. This is that cast, made
/// cheap: a fifth of reading Parquet bids went there.)
pub(crate) fn utc_unit_cast(
    column: &ArrayRef,
    target: &DataType,
    options: &CastOptions,
) -> Option<std::result::Result<ArrayRef, riffle_core::arrow::error::ArrowError>> {
    let is_utc = |zone: &Option<Arc<str>>| zone.as_deref().is_none_or(|z| z == "UTC");
    let (DataType::Timestamp(_, from), DataType::Timestamp(unit, to)) =
        (column.data_type(), target)
    else {
        return None;
    };
    if !is_utc(from) || !is_utc(to) {
        return None;
    }
    Some(
        cast_with_options(column, &DataType::Timestamp(*unit, None), options)
            .and_then(|naive| retyped(naive, target)),
    )
}

/// `values` as `target`, a type of the same layout (64-bit integers as a timestamp of
/// any unit and zone): only the type changes, not a value.
pub(crate) fn retyped(
    values: ArrayRef,
    target: &DataType,
) -> std::result::Result<ArrayRef, riffle_core::arrow::error::ArrowError> {
    let data = values
        .into_data()
        .into_builder()
        .data_type(target.clone())
        .build()?;
    Ok(make_array(data))
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
    if let Some(nanos) = utc_unit_cast(column, &timestamp_type(), &safe) {
        return Ok(nanos?);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_time_in_utc_or_without_a_zone_is_the_same_instant_in_nanoseconds() {
        use riffle_core::arrow::array::TimestampMillisecondArray;
        let millis = vec![Some(-86_400_001), None, Some(0), Some(1_735_689_601_500)];
        let safe = CastOptions {
            safe: true,
            ..Default::default()
        };
        for zone in [None, Some("UTC")] {
            let column: ArrayRef =
                Arc::new(TimestampMillisecondArray::from(millis.clone()).with_timezone_opt(zone));
            let ours = event_time_nanos(&column).unwrap();
            let arrow = cast_with_options(&column, &timestamp_type(), &safe).unwrap();
            assert_eq!(ours.data_type(), &timestamp_type());
            assert_eq!(&ours, &arrow, "zone {zone:?}");
        }
    }

    #[test]
    fn a_unit_cast_between_utc_and_no_zone_is_arrows_cast() {
        use riffle_core::arrow::array::TimestampMicrosecondArray;
        let micros = vec![Some(-86_400_000_001), None, Some(0), Some(i64::MAX / 10)];
        for exact in [false, true] {
            let options = CastOptions {
                safe: !exact,
                ..Default::default()
            };
            for from in [None, Some("UTC")] {
                for to in [None, Some("UTC")] {
                    for unit in [
                        TimeUnit::Second,
                        TimeUnit::Millisecond,
                        TimeUnit::Nanosecond,
                    ] {
                        let column: ArrayRef = Arc::new(
                            TimestampMicrosecondArray::from(micros.clone()).with_timezone_opt(from),
                        );
                        let target = DataType::Timestamp(unit, to.map(Into::into));
                        let ours = utc_unit_cast(&column, &target, &options).expect("both UTC");
                        let arrow = cast_with_options(&column, &target, &options);
                        match (ours, arrow) {
                            (Ok(ours), Ok(arrow)) => {
                                assert_eq!(&ours, &arrow, "{from:?} to {target}")
                            }
                            (Err(_), Err(_)) => {}
                            (ours, arrow) => {
                                panic!("{from:?} to {target}: {ours:?} against {arrow:?}")
                            }
                        }
                    }
                }
            }
        }
        let elsewhere = DataType::Timestamp(TimeUnit::Second, Some("+01:00".into()));
        let column: ArrayRef = Arc::new(TimestampMicrosecondArray::from(micros));
        assert!(utc_unit_cast(&column, &elsewhere, &CastOptions::default()).is_none());
    }
}
