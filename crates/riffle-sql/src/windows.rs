//! The window functions of riffle SQL: `tumble(size)`, `hop(slide, size)`,
//! `cumulate(step, max)` and `session(gap)`, Arroyo style. In `GROUP BY` they assign rows to event-time windows;
//! their value is the struct `{start, end}` of the window. They are planning markers:
//! DataFusion never evaluates them (the translator replaces them with riffle's window
//! operators), so they are volatile to keep the optimizer from folding them.

use crate::error::{Result, SqlError};
use datafusion::arrow::datatypes::{DataType, Field, Fields};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{
    ColumnarValue, Expr, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use riffle_core::timestamp_type;
use riffle_operators::WindowSpec;
use std::time::Duration;

/// Names of the window functions.
pub const WINDOW_FUNCTIONS: [&str; 4] = ["tumble", "hop", "cumulate", "session"];

/// The type of a window value: `{start, end}` timestamps (end exclusive).
pub fn window_type() -> DataType {
    DataType::Struct(Fields::from(vec![
        Field::new("start", timestamp_type(), false),
        Field::new("end", timestamp_type(), false),
    ]))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct WindowFunction {
    name: &'static str,
    signature: Signature,
}

impl ScalarUDFImpl for WindowFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(window_type())
    }

    fn invoke_with_args(&self, _: ScalarFunctionArgs) -> datafusion::common::Result<ColumnarValue> {
        datafusion::common::plan_err!(
            "{}() assigns rows to event-time windows; it only runs inside a riffle pipeline",
            self.name
        )
    }
}

/// The window functions, to register with the planner.
pub fn window_udfs() -> Vec<ScalarUDF> {
    WINDOW_FUNCTIONS
        .iter()
        .map(|name| {
            ScalarUDF::from(WindowFunction {
                name,
                signature: Signature::variadic_any(Volatility::Volatile),
            })
        })
        .collect()
}

/// `expr` without its aliases (DataFusion may stack several: `x AS count(*) AS num`).
pub fn unaliased(mut expr: &Expr) -> &Expr {
    while let Expr::Alias(a) = expr {
        expr = a.expr.as_ref();
    }
    expr
}

/// The window a call of `tumble`/`hop`/`session` describes, or `None` when `expr` is
/// not such a call (aliases are looked through).
///
/// # Errors
/// Wrong argument count, non-literal or non-positive intervals, a hop whose size is not
/// a multiple of its slide.
pub fn window_call(expr: &Expr) -> Result<Option<WindowSpec>> {
    let expr = crate::windows::unaliased(expr);
    let Expr::ScalarFunction(f) = expr else {
        return Ok(None);
    };
    let name = f.func.name();
    if !WINDOW_FUNCTIONS.contains(&name) {
        return Ok(None);
    }
    let usage = match name {
        "tumble" => "tumble(INTERVAL '10' SECOND)",
        "hop" => "hop(INTERVAL '2' SECOND, INTERVAL '10' SECOND)  -- slide, then size",
        "cumulate" => "cumulate(INTERVAL '2' SECOND, INTERVAL '10' SECOND)  -- step, then max size",
        _ => "session(INTERVAL '10' SECOND)  -- the inactivity gap",
    };
    let wrong = |why: String| SqlError::Plan {
        at: None,
        message: format!("{expr}: {why}"),
        hint: Some(format!("write {usage}")),
    };
    let sizes = match descriptor_of(&f.args, name) {
        Some(_) => &f.args[1..],
        None => &f.args[..],
    };
    let durations = sizes
        .iter()
        .map(|a| {
            interval(a).ok_or_else(|| wrong(format!("`{a}` is not a positive interval literal")))
        })
        .collect::<Result<Vec<_>>>()?;
    let spec = match (name, durations.as_slice()) {
        ("tumble", [size]) => WindowSpec::tumbling(*size),
        // A TUMBLE table function's offset (`tvf.rs`).
        ("tumble", [size, offset]) if descriptor_of(&f.args, name).is_some() => {
            WindowSpec::Tumbling {
                size: *size,
                offset: Duration::from_nanos((offset.as_nanos() % size.as_nanos()) as u64),
            }
        }
        ("hop", [slide, size]) => {
            if size.as_nanos() % slide.as_nanos() != 0 {
                return Err(wrong("the size must be a multiple of the slide".into()));
            }
            WindowSpec::Hopping {
                size: *size,
                slide: *slide,
            }
        }
        ("cumulate", [step, max]) => {
            if max.as_nanos() % step.as_nanos() != 0 {
                return Err(wrong("the max size must be a multiple of the step".into()));
            }
            WindowSpec::Cumulating {
                step: *step,
                max: *max,
            }
        }
        ("session", [gap]) => WindowSpec::Session { gap: *gap },
        _ => return Err(wrong(format!("takes {} argument(s)", interval_count(name)))),
    };
    Ok(Some(spec))
}

/// The DESCRIPTOR column a window TVF passed to its window function, if any.
pub fn window_descriptor(expr: &Expr) -> Option<&datafusion::common::Column> {
    match unaliased(expr) {
        Expr::ScalarFunction(f) if WINDOW_FUNCTIONS.contains(&f.func.name()) => {
            descriptor_of(&f.args, f.func.name())
        }
        _ => None,
    }
}

/// How many intervals the window function `name` takes.
pub(crate) fn interval_count(name: &str) -> usize {
    match name {
        "hop" | "cumulate" => 2,
        _ => 1,
    }
}

/// A window TVF passes its DESCRIPTOR column before the sizes (`tvf.rs`): a column
/// first, and one argument more than the function's sizes.
fn descriptor_of<'e>(args: &'e [Expr], name: &str) -> Option<&'e datafusion::common::Column> {
    let sizes = interval_count(name);
    // A tumble's offset follows its size.
    let offset = usize::from(name == "tumble");
    match args.first() {
        Some(Expr::Column(c)) if (sizes + 1..=sizes + 1 + offset).contains(&args.len()) => Some(c),
        _ => None,
    }
}

/// `window_time(w)`: the time attribute of window `w`, its end less 1 ms (Flink's
/// `window_time` of a window TVF: the last millisecond inside the window).
#[derive(Debug, PartialEq, Eq, Hash)]
struct WindowTime {
    signature: Signature,
}

/// Name of the window-time function.
pub const WINDOW_TIME: &str = "window_time";

impl ScalarUDFImpl for WindowTime {
    fn name(&self) -> &str {
        WINDOW_TIME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> datafusion::common::Result<DataType> {
        Ok(timestamp_type())
    }

    fn invoke_with_args(
        &self,
        args: ScalarFunctionArgs,
    ) -> datafusion::common::Result<ColumnarValue> {
        use datafusion::arrow::array::{Array, AsArray, TimestampNanosecondArray};
        let [window] = args.args.as_slice() else {
            return datafusion::common::exec_err!("window_time takes one window");
        };
        let window = window.to_array(args.number_rows)?;
        let Some(window) = window.as_struct_opt() else {
            return datafusion::common::exec_err!("window_time takes a window {{start, end}}");
        };
        let Some(end) = window.column_by_name("end").and_then(|e| {
            e.as_primitive_opt::<datafusion::arrow::datatypes::TimestampNanosecondType>()
        }) else {
            return datafusion::common::exec_err!("window_time takes a window {{start, end}}");
        };
        let time: TimestampNanosecondArray = end
            .iter()
            .enumerate()
            .map(|(i, e)| {
                e.filter(|_| window.is_valid(i))
                    .map(|e| e - WINDOW_TIME_BEFORE_END_NANOS)
            })
            .collect();
        Ok(ColumnarValue::Array(std::sync::Arc::new(
            time.with_data_type(timestamp_type()),
        )))
    }
}

pub use riffle_operators::window::WINDOW_TIME_BEFORE_END_NANOS;

/// `window_time`, to register with the planner.
pub fn window_time_udf() -> ScalarUDF {
    ScalarUDF::from(WindowTime {
        signature: Signature::any(1, Volatility::Immutable),
    })
}

/// A positive interval literal as a duration (months are refused: they have no fixed length).
fn interval(expr: &Expr) -> Option<Duration> {
    let expr = match expr {
        Expr::Cast(c) => c.expr.as_ref(),
        e => e,
    };
    let nanos = interval_nanos(expr)?;
    (nanos > 0)
        .then(|| u64::try_from(nanos).ok().map(Duration::from_nanos))
        .flatten()
}

/// The nanoseconds of an interval literal without months.
pub(crate) fn interval_nanos(e: &Expr) -> Option<i128> {
    match e {
        Expr::Literal(ScalarValue::IntervalMonthDayNano(Some(v)), _) if v.months == 0 => {
            Some(i128::from(v.days) * 86_400_000_000_000 + i128::from(v.nanoseconds))
        }
        Expr::Literal(ScalarValue::IntervalDayTime(Some(v)), _) => {
            Some(i128::from(v.days) * 86_400_000_000_000 + i128::from(v.milliseconds) * 1_000_000)
        }
        _ => None,
    }
}
