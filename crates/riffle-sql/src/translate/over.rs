//! OVER aggregations: `agg(x) OVER (PARTITION BY p ORDER BY o ROWS|RANGE BETWEEN …
//! PRECEDING AND CURRENT ROW)` as `OverAggregateFactory`. Over append-only rows the
//! ORDER BY is the event time ascending, as Flink requires, and each row leaves once
//! with its aggregate; over an updating result (a Top-N's) any order is allowed and the
//! result is updating, keyed as its input.

use super::{Stream, Translator};
use crate::error::{Result, SqlError};
use crate::windows::unaliased;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{
    Expr, Window, WindowFrame, WindowFrameBound, WindowFrameUnits, WindowFunctionDefinition,
};
use riffle_operators::{
    OrderColumn, OverAggregate, OverAggregateFactory, OverFrame, OverFunction, OverInput,
};
use std::sync::Arc;
use std::time::Duration;

const HINT: &str = "riffle runs count, sum, min, max and avg OVER (PARTITION BY … ORDER BY <event time> ROWS|RANGE BETWEEN … PRECEDING AND CURRENT ROW), and ROW_NUMBER() bounded in the WHERE of the query around it (… WHERE rn <= 10: Top-N)";

impl Translator<'_> {
    /// An OVER aggregation (every window expression of `w` shares one OVER clause).
    pub(super) fn over(&mut self, w: &Window) -> Result<Stream> {
        let in_schema = w.input.schema();
        let mut aggregates = Vec::new();
        let mut shared: Option<&datafusion::logical_expr::expr::WindowFunctionParams> = None;
        for (k, e) in w.window_expr.iter().enumerate() {
            let Expr::WindowFunction(f) = unaliased(e) else {
                return Err(SqlError::unsupported(
                    format!("the window expression `{e}`"),
                    HINT,
                ));
            };
            let name = f.fun.name().to_lowercase();
            if matches!(name.as_str(), "rank" | "dense_rank" | "percent_rank") {
                return Err(SqlError::unsupported(
                    format!("{}() OVER (…) on a stream (Flink 2.3 refuses it too)", name.to_uppercase()),
                    "rank with ROW_NUMBER() OVER (PARTITION BY … ORDER BY …) AS rn, bounded in the WHERE around it: WHERE rn <= N (Top-N)",
                ));
            }
            if !matches!(f.fun, WindowFunctionDefinition::AggregateUDF(_)) {
                return Err(SqlError::unsupported(
                    format!("{}() OVER (…) outside a Top-N", name.to_uppercase()),
                    HINT,
                ));
            }
            let params = &f.params;
            if params.filter.is_some() || params.distinct {
                return Err(SqlError::unsupported(
                    format!("DISTINCT or FILTER in `{e}`"),
                    "filter the rows in a subquery first",
                ));
            }
            match shared {
                None => shared = Some(params),
                Some(s)
                    if s.partition_by == params.partition_by
                        && s.order_by == params.order_by
                        && s.window_frame == params.window_frame => {}
                Some(_) => {
                    return Err(SqlError::unsupported(
                        "two different OVER windows in one SELECT",
                        "compute each in a subquery of its own",
                    ))
                }
            }
            let function = match (name.as_str(), params.args.as_slice()) {
                ("count", []) => OverFunction::CountStar,
                ("count", [Expr::Literal(..)]) => OverFunction::CountStar,
                ("count", [_]) => OverFunction::Count,
                ("sum", [_]) => OverFunction::Sum,
                ("min", [_]) => OverFunction::Min,
                ("max", [_]) => OverFunction::Max,
                ("avg", [_]) => OverFunction::Avg,
                _ => {
                    return Err(SqlError::unsupported(
                        format!("`{e}` as an OVER aggregate"),
                        HINT,
                    ))
                }
            };
            let output = w.schema.field(in_schema.fields().len() + k);
            aggregates.push((function, params.args.first(), output.data_type().clone()));
        }
        let Some(params) = shared else {
            return Err(SqlError::unsupported(
                "an OVER clause without a function",
                HINT,
            ));
        };
        let input = self.translate(&w.input)?;
        let input = self.materialize_unless(&input, None)?;
        let input = self.prune(&input)?;
        let column = |e: &Expr, what: &str| -> Result<(usize, String)> {
            match unaliased(e) {
                Expr::Column(c) => {
                    let i = in_schema.index_of_column(c)?;
                    Ok((i, input.columns[i].clone()))
                }
                other => Err(SqlError::unsupported(
                    format!("the {what} `{other}` of an OVER window"),
                    "compute it as a column in a subquery first",
                )),
            }
        };
        let partition = params
            .partition_by
            .iter()
            .map(|e| column(e, "PARTITION BY expression").map(|c| c.1))
            .collect::<Result<Vec<_>>>()?;
        if params.order_by.is_empty() {
            return Err(SqlError::unsupported(
                "an OVER window without ORDER BY",
                "order it by the event-time column: OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)",
            ));
        }
        let frame = frame(&params.window_frame)?;
        if input.changelog {
            return Err(SqlError::unsupported(
                "an OVER window over a changelog (a filtered GROUP BY without a window)",
                "rank the GROUP BY's result before filtering it",
            ));
        }
        let mode = match &input.updating {
            None => {
                let [sort] = params.order_by.as_slice() else {
                    return Err(SqlError::unsupported(
                        "an OVER window over a stream ordered by more than its event time",
                        "ORDER BY the event-time column alone (the WATERMARK column)",
                    ));
                };
                let (i, _) = column(&sort.expr, "ORDER BY expression")?;
                if input.event_time != Some(i) || !sort.asc {
                    return Err(SqlError::unsupported(
                        format!("an OVER window over a stream ordered by `{}`", sort),
                        "ORDER BY the event-time column ascending (the WATERMARK column): rows of a stream are final in event-time order",
                    ));
                }
                OverInput::EventTime
            }
            Some(keys) => OverInput::Updating {
                key: keys.iter().map(|&k| input.columns[k].clone()).collect(),
                order: params
                    .order_by
                    .iter()
                    .map(|s| {
                        Ok(OrderColumn {
                            column: column(&s.expr, "ORDER BY expression")?.1,
                            descending: !s.asc,
                            nulls_first: s.nulls_first,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?,
            },
        };
        let mut taken = input.physical_columns();
        let mut specs = Vec::new();
        let mut names = Vec::new();
        for (k, (function, arg, output_type)) in aggregates.into_iter().enumerate() {
            let input_column = match (function, arg) {
                (OverFunction::CountStar, _) | (_, None) => None,
                (_, Some(a)) => Some(column(a, "argument")?.1),
            };
            let name = super::fresh_name(&format!("over_{k}"), &taken);
            taken.push(name.clone());
            names.push(name.clone());
            specs.push(OverAggregate {
                function,
                input: input_column,
                output: name,
                output_type,
            });
        }
        let schema = self.graph.schema(input.node).clone();
        let refs: Vec<&str> = partition.iter().map(String::as_str).collect();
        let factory = OverAggregateFactory::new(&schema, &refs, frame, &specs, mode)?;
        let p = Some(self.parallelism());
        let node = self.add("over", Arc::new(factory), p, &[input.node])?;
        let mut columns = input.columns.clone();
        columns.extend(names);
        let mut stream = Stream::of_node(node, columns);
        stream.event_time = input.event_time;
        stream.updating = input.updating.clone();
        Ok(stream)
    }
}

/// The frame of `f`, which must end at the current row.
fn frame(f: &WindowFrame) -> Result<OverFrame> {
    if f.end_bound != WindowFrameBound::CurrentRow {
        return Err(SqlError::unsupported(
            format!("the OVER frame `{f}` (rows after the current one)"),
            "end the frame at CURRENT ROW: a row's aggregate cannot wait for later rows",
        ));
    }
    let WindowFrameBound::Preceding(start) = &f.start_bound else {
        return Err(SqlError::unsupported(
            format!("the OVER frame `{f}`"),
            "write ROWS BETWEEN n PRECEDING AND CURRENT ROW or RANGE BETWEEN INTERVAL … PRECEDING AND CURRENT ROW",
        ));
    };
    let unbounded = start.is_null();
    Ok(match f.units {
        WindowFrameUnits::Rows if unbounded => OverFrame::Rows(None),
        WindowFrameUnits::Rows => match start.cast_to(&DataType::UInt64) {
            Ok(ScalarValue::UInt64(Some(n))) => OverFrame::Rows(Some(n as usize)),
            _ => {
                return Err(SqlError::plan(format!(
                    "ROWS BETWEEN {start} PRECEDING: the count must be a whole number"
                )))
            }
        },
        WindowFrameUnits::Range if unbounded => OverFrame::Range(None),
        WindowFrameUnits::Range => OverFrame::Range(Some(interval(start)?)),
        WindowFrameUnits::Groups => {
            return Err(SqlError::unsupported(
                "GROUPS frames",
                "write ROWS or RANGE BETWEEN … PRECEDING AND CURRENT ROW",
            ))
        }
    })
}

/// A RANGE frame's length, an interval of days and smaller units.
fn interval(v: &ScalarValue) -> Result<Duration> {
    let nanos: Option<i128> = match v {
        ScalarValue::IntervalDayTime(Some(d)) => {
            Some(i128::from(d.days) * 86_400_000_000_000 + i128::from(d.milliseconds) * 1_000_000)
        }
        ScalarValue::IntervalMonthDayNano(Some(i)) if i.months == 0 => {
            Some(i128::from(i.days) * 86_400_000_000_000 + i128::from(i.nanoseconds))
        }
        _ => None,
    };
    nanos
        .and_then(|n| u64::try_from(n).ok())
        .map(Duration::from_nanos)
        .ok_or_else(|| {
            SqlError::unsupported(
                format!("RANGE BETWEEN {v} PRECEDING"),
                "give the range as an interval of event time: RANGE BETWEEN INTERVAL '10' SECOND PRECEDING AND CURRENT ROW",
            )
        })
}
