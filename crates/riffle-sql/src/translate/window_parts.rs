//! Fields holding part of a window: `w['start']`, `w['end']` and `window_time(w)` of a
//! window call or of a window field. Window TVFs (`tvf.rs`) give every row these
//! three; `GROUP BY window_start, window_end` and joins on them then see the window.

use super::{field_expr_bounds, Stream, Translator, WindowColumn, WindowOrigin, WindowPart};
use crate::error::{Result, SqlError};
use crate::windows::{unaliased, window_call, window_descriptor, WINDOW_TIME};
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::logical_expr::Expr;
use riffle_operators::WindowSpec;

/// What a projection makes of a window-part expression.
pub(super) enum PartField {
    /// Computed on read from the event time (a per-row window).
    Virtual(WindowColumn),
    /// A column computed from a window column.
    Computed(Expr, WindowColumn),
}

/// The window and the part `expr` takes of it, if it is `w['start']`, `w['end']` or
/// `window_time(w)`.
fn part_of(expr: &Expr) -> Option<(&Expr, WindowPart)> {
    let Expr::ScalarFunction(f) = expr else {
        return None;
    };
    match (f.func.name(), f.args.as_slice()) {
        ("get_field", [w, Expr::Literal(ScalarValue::Utf8(Some(n)), _)]) => match n.as_str() {
            "start" => Some((w, WindowPart::Start)),
            "end" => Some((w, WindowPart::End)),
            _ => None,
        },
        (name, [w]) if name == WINDOW_TIME => Some((w, WindowPart::Time)),
        _ => None,
    }
}

impl Translator<'_> {
    /// `expr` as a window-part field of a projection over `input`, or `None`.
    pub(super) fn window_part_field(
        &self,
        expr: &Expr,
        input: &Stream,
        schema: &DFSchema,
    ) -> Result<Option<PartField>> {
        let Some((window, part)) = part_of(expr) else {
            return Ok(None);
        };
        let window = unaliased(window);
        if let Some(spec) = window_call(window)? {
            check_time_column(window, input, schema, self.processing_time)?;
            if let WindowSpec::Session { .. } = spec {
                return Err(SqlError::unsupported(
                    format!("`{expr}` outside GROUP BY"),
                    "group by session(…) AS w and read w['start'] / w['end'] from the result",
                ));
            }
            return Ok(Some(PartField::Virtual(WindowColumn {
                spec,
                origin: WindowOrigin::PerRow,
                part,
            })));
        }
        let Expr::Column(c) = window else {
            return Ok(None);
        };
        let k = schema.index_of_column(c)?;
        match input.windows[k] {
            Some(w) if w.part == WindowPart::Whole => {
                let w = WindowColumn { part, ..w };
                Ok(Some(if input.is_virtual(k) {
                    PartField::Virtual(w)
                } else {
                    PartField::Computed(self.rewrite(expr, input, schema)?, w)
                }))
            }
            _ => Ok(None),
        }
    }
}

/// Checks that the time column a window call names (a TVF's DESCRIPTOR, or the first
/// argument of a group window such as `SESSION(ts, gap)`) is the event time.
///
/// # Errors
/// Another column, e.g. a processing-time one.
pub(super) fn check_time_column(
    window: &Expr,
    input: &Stream,
    schema: &DFSchema,
    processing_time: bool,
) -> Result<()> {
    let Some(column) = window_descriptor(window) else {
        return Ok(());
    };
    let k = schema.index_of_column(column)?;
    if input.event_time == Some(k) {
        return Ok(());
    }
    // Cascading windows: the `window_time` of a window operator's rows. Their own time is
    // their window's end less 1 ns, in the same window of whole milliseconds as the
    // `window_time` (end less 1 ms), so a window over it is assigned as Flink assigns it.
    if input.windows.get(k).copied().flatten().is_some_and(|w| {
        w.part == WindowPart::Time && matches!(w.origin, WindowOrigin::Operator(_))
    }) {
        return Ok(());
    }
    let hint = if processing_time {
        "this pipeline has a window on a PROCTIME() column, so its sources are read in processing time and their event-time columns are plain values: run event-time and processing-time windows in separate pipelines"
    } else {
        "name the column of the table's WATERMARK FOR (event time), or a column defined as PROCTIME() (processing time)"
    };
    Err(SqlError::Plan {
        at: None,
        message: format!(
            "the window's time column `{}` is not the time of its rows",
            column.name
        ),
        hint: Some(hint.into()),
    })
}

/// The value of a per-row window field: only a tumbling window is one per row.
pub(super) fn virtual_value(w: WindowColumn, name: &str) -> Result<Expr> {
    match w.spec {
        WindowSpec::Tumbling { size, offset } => Ok(field_expr_bounds(size, offset, w.part)),
        _ => Err(SqlError::unsupported(
            format!("a {} window's `{name}` outside GROUP BY", w.spec.describe()),
            "a row falls in several hopping or cumulating windows: group by window_start, window_end first",
        )),
    }
}
