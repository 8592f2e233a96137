//! Rows of a `HOP` or `CUMULATE` table function that are not grouped right away: each
//! row becomes one row per window holding it, as in Flink (`WindowExpandFactory`).

use super::{fresh_name, Stream, Translator, WindowColumn, WindowOrigin, WindowPart};
use crate::error::{Result, SqlError};
use datafusion::common::DFSchema;
use datafusion::logical_expr::Expr;
use riffle_operators::{WindowBound, WindowExpandFactory, WindowSpec};
use std::sync::Arc;

/// Whether field `i` of `stream` is a per-row hopping or cumulating window part, not
/// of the window `keep` (which the consumer assigns itself).
fn expands(stream: &Stream, i: usize, keep: Option<WindowSpec>) -> Option<WindowColumn> {
    let w = stream.windows[i].filter(|_| stream.is_virtual(i))?;
    let per_row = w.origin == WindowOrigin::PerRow && Some(w.spec) != keep;
    let several = matches!(
        w.spec,
        WindowSpec::Hopping { .. } | WindowSpec::Cumulating { .. }
    );
    (per_row && several).then_some(w)
}

impl Translator<'_> {
    /// `stream`, expanded first when an expression of `exprs` (over `schema`) reads one
    /// of its per-row hopping or cumulating window fields (`WHERE window_start > …`): a
    /// field passed through as it is stays a window part for a later GROUP BY.
    pub(super) fn expand_if_read<'e>(
        &mut self,
        stream: &Stream,
        exprs: impl IntoIterator<Item = &'e Expr>,
        schema: &DFSchema,
    ) -> Result<Stream> {
        let mut read = false;
        for e in exprs {
            if let Expr::Column(_) = crate::windows::unaliased(e) {
                continue;
            }
            for c in e.column_refs() {
                let i = schema.index_of_column(c)?;
                read |= expands(stream, i, None).is_some();
            }
        }
        if read {
            self.expand_windows(stream, None)
        } else {
            Ok(stream.clone())
        }
    }

    /// `stream` with its per-row hopping or cumulating window fields (other than of
    /// `keep`) made columns of one row per window; `stream` itself when it has none.
    pub(crate) fn expand_windows(
        &mut self,
        stream: &Stream,
        keep: Option<WindowSpec>,
    ) -> Result<Stream> {
        let fields: Vec<(usize, WindowColumn)> = (0..stream.columns.len())
            .filter_map(|i| expands(stream, i, keep).map(|w| (i, w)))
            .collect();
        let Some(&(_, first)) = fields.first() else {
            return Ok(stream.clone());
        };
        // Every per-row window must be this one: another's parts would be computed from
        // the copies' time.
        let other = (0..stream.columns.len())
            .filter(|&i| stream.is_virtual(i))
            .filter_map(|i| stream.windows[i])
            .find(|w| w.spec != first.spec);
        if let Some(other) = other {
            return Err(SqlError::unsupported(
                format!(
                    "rows in two kinds of windows at once ({} and {})",
                    first.spec.describe(),
                    other.spec.describe()
                ),
                "apply one window table function to a table",
            ));
        }
        let mut taken = stream.physical_columns();
        let mut out_columns = stream.columns.clone();
        let mut columns: Vec<(String, WindowBound)> = Vec::new();
        for &(i, w) in &fields {
            let (base, bound) = match w.part {
                WindowPart::Start => ("window_start", WindowBound::Start),
                WindowPart::End => ("window_end", WindowBound::End),
                WindowPart::Time => ("window_time", WindowBound::Time),
                WindowPart::Whole => {
                    return Err(SqlError::unsupported(
                        format!(
                            "a {} window as one value outside GROUP BY",
                            w.spec.describe()
                        ),
                        "read its window_start and window_end",
                    ))
                }
            };
            let name = fresh_name(base, &taken);
            taken.push(name.clone());
            out_columns[i] = name.clone();
            columns.push((name, bound));
        }
        let refs: Vec<(&str, WindowBound)> =
            columns.iter().map(|(n, b)| (n.as_str(), *b)).collect();
        let f = WindowExpandFactory::new(self.graph.schema(stream.node), first.spec, &refs)?;
        let node = self.add("window_expand", Arc::new(f), None, &[stream.node])?;
        let mut out = Stream::of_node(node, out_columns);
        // The copies carry their window's last instant as event time: the row's own
        // time column no longer is the event time, the window parts are real columns.
        // Columns of other windows' parts are plain values now.
        out.windows = (0..stream.columns.len())
            .map(|i| {
                let (_, w) = fields.iter().find(|(f, _)| *f == i)?;
                Some(WindowColumn {
                    origin: WindowOrigin::Operator(node),
                    ..*w
                })
            })
            .collect();
        Ok(out)
    }
}
