//! `PROCTIME()`: Flink's processing time, the wall-clock time at which a row is
//! computed (UTC, milliseconds). It is not reproducible: a row replayed after a restore
//! gets the time of the replay. riffle accepts it where only that is at stake, as the
//! `AS OF` column of a lookup join (docs/from-flink.md, "Processing time").

use datafusion::arrow::array::TimestampMillisecondArray;
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::{exec_err, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, PartialEq, Eq, Hash)]
struct Proctime {
    signature: Signature,
}

impl ScalarUDFImpl for Proctime {
    fn name(&self) -> &str {
        "proctime"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Timestamp(TimeUnit::Millisecond, None))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let Ok(now) = SystemTime::now().duration_since(UNIX_EPOCH) else {
            return exec_err!("PROCTIME(): the system clock is before 1970");
        };
        let millis = i64::try_from(now.as_millis()).unwrap_or(i64::MAX);
        let values = TimestampMillisecondArray::from_value(millis, args.number_rows);
        Ok(ColumnarValue::Array(Arc::new(values)))
    }
}

/// `PROCTIME()`, volatile so that the planner never folds it into a constant.
pub fn proctime_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(Proctime {
        signature: Signature::exact(vec![], Volatility::Volatile),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::{Field, TimestampMillisecondType};
    use datafusion::config::ConfigOptions;

    #[test]
    fn proctime_is_the_wall_clock_for_every_row() {
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let out = proctime_udf()
            .invoke_with_args(ScalarFunctionArgs {
                args: vec![],
                arg_fields: vec![],
                number_rows: 3,
                return_field: Arc::new(Field::new(
                    "p",
                    DataType::Timestamp(TimeUnit::Millisecond, None),
                    false,
                )),
                config_options: Arc::new(ConfigOptions::default()),
            })
            .unwrap();
        let ColumnarValue::Array(a) = out else {
            panic!("an array")
        };
        let a = a.as_primitive::<TimestampMillisecondType>();
        assert_eq!(a.len(), 3);
        assert!(a
            .values()
            .iter()
            .all(|&v| v >= before && v < before + 60_000));
    }
}
