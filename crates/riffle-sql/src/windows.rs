//! The window functions of riffle SQL: `tumble(size)`, `hop(slide, size)` and
//! `session(gap)`, Arroyo style. In `GROUP BY` they assign rows to event-time windows;
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
pub const WINDOW_FUNCTIONS: [&str; 3] = ["tumble", "hop", "session"];

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
        _ => "session(INTERVAL '10' SECOND)  -- the inactivity gap",
    };
    let wrong = |why: String| SqlError::Plan {
        at: None,
        message: format!("{expr}: {why}"),
        hint: Some(format!("write {usage}")),
    };
    let durations = f
        .args
        .iter()
        .map(|a| {
            interval(a).ok_or_else(|| wrong(format!("`{a}` is not a positive interval literal")))
        })
        .collect::<Result<Vec<_>>>()?;
    let spec = match (name, durations.as_slice()) {
        ("tumble", [size]) => WindowSpec::Tumbling { size: *size },
        ("hop", [slide, size]) => {
            if size.as_nanos() % slide.as_nanos() != 0 {
                return Err(wrong("the size must be a multiple of the slide".into()));
            }
            WindowSpec::Hopping {
                size: *size,
                slide: *slide,
            }
        }
        ("session", [gap]) => WindowSpec::Session { gap: *gap },
        _ => {
            return Err(wrong(format!(
                "takes {} argument(s)",
                if name == "hop" { 2 } else { 1 }
            )))
        }
    };
    Ok(Some(spec))
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
