//! `GROUP BY`: window aggregates (tumble, hop, cumulate, session, or a window column of the input),
//! unbounded updating aggregates, and the interval-max join of Nexmark q4.

use super::{
    col_expr, nanos_lit, nanos_of, Stream, Translator, WindowColumn, WindowOrigin, WindowPart,
};
use crate::error::{Result, SqlError};
use crate::windows::window_call;
use datafusion::logical_expr::expr::AggregateFunction as DfAggregate;
use datafusion::logical_expr::{cast, lit, when, Aggregate, Expr, ExprSchemable, LogicalPlan};
use riffle_operators::{
    AggregateFunction, AggregateSpec, ProjectFactory, RetractingAggregateFactory,
    SessionAggregateFactory, UpdatingAggregateFactory, WindowAggregateFactory, WindowSpec,
};
use std::sync::Arc;

/// How the rows are windowed.
enum Grouping {
    /// `tumble(…)`/`hop(…)`/`session(…)` in GROUP BY.
    Call(WindowSpec),
    /// A window column of the input (an aggregate of an aggregate, per window).
    Column(WindowColumn),
    /// No window: an updating result.
    None,
}

impl Translator<'_> {
    pub(super) fn aggregate(&mut self, agg: &Aggregate) -> Result<Stream> {
        let changelog = std::mem::take(&mut self.changelog_wanted);
        if let Some(s) = self.interval_max(agg)? {
            return Ok(s);
        }
        let input = self.translate_as_changelog(&agg.input)?;
        if input.updating.is_some() && !input.changelog {
            return Err(SqlError::unsupported(
                "an aggregate over an updating result that is not a changelog (an OVER window over an unwindowed GROUP BY)",
                "aggregate the input of the OVER window",
            ));
        }
        // The keyed exchange into the aggregate carries only what it reads.
        let input = self.prune(&input)?;
        let in_schema = agg.input.schema();
        let mut grouping = Grouping::None;
        // The group expressions that are the window, with the part each one is.
        let mut window_at: Vec<(usize, WindowPart)> = Vec::new();
        let mut keys: Vec<String> = Vec::new();
        // Computed keys and aggregate inputs, evaluated by a projection first.
        let mut pre: Vec<(Expr, String)> = Vec::new();
        let mut window: Option<WindowColumn> = None;
        for (i, g) in agg.group_expr.iter().enumerate() {
            let found = match window_call(g)? {
                Some(spec) => {
                    super::window_parts::check_time_column(
                        g,
                        &input,
                        in_schema,
                        self.processing_time,
                    )?;
                    Some(WindowColumn {
                        spec,
                        origin: WindowOrigin::PerRow,
                        part: WindowPart::Whole,
                    })
                }
                None => match g {
                    Expr::Column(c) => input.windows[in_schema.index_of_column(c)?],
                    _ => None,
                },
            };
            if let Some(found) = found {
                // `window_start` and `window_end` of one window name it twice.
                let same = |w: &WindowColumn| w.spec == found.spec && w.origin == found.origin;
                if window.as_ref().is_some_and(|w| !same(w)) {
                    return Err(SqlError::plan("GROUP BY names two windows; group by one"));
                }
                window = Some(found);
                window_at.push((i, found.part));
                // A per-row window is assigned from each row's event time (a hop puts
                // a row in several); a window of the input is grouped as it is.
                grouping = match found.origin {
                    WindowOrigin::PerRow => Grouping::Call(found.spec),
                    WindowOrigin::Operator(_) => Grouping::Column(found),
                };
                continue;
            }
            if let Expr::GroupingSet(_) = g {
                return Err(SqlError::unsupported(
                    "GROUPING SETS / CUBE / ROLLUP",
                    "write one query per grouping",
                ));
            }
            let name = self.input_column(g, &input, in_schema, &mut pre, "key")?;
            keys.push(name);
        }
        // Each aggregate's column, named apart from the key columns: a regrouped count
        // (`GROUP BY bids` of an inner `count(*) AS bids`) groups by a column DataFusion
        // named `count(Int64(1))`, as it names the outer count.
        let mut specs = Vec::new();
        let mut outputs: Vec<String> = Vec::new();
        for (j, a) in agg.aggr_expr.iter().enumerate() {
            let df = agg.schema.field(agg.group_expr.len() + j).name();
            let taken: Vec<String> = keys.iter().chain(&outputs).cloned().collect();
            let out = super::fresh_name(df, &taken);
            specs.push(self.aggregate_spec(a, &out, &input, in_schema, &mut pre)?);
            outputs.push(out);
        }
        let mut source = input.node;
        if !pre.is_empty() {
            let mut exprs: Vec<Expr> = input
                .physical_columns()
                .into_iter()
                .map(|c| col_expr(&c))
                .collect();
            exprs.extend(pre.iter().map(|(e, n)| e.clone().alias(n)));
            let factory = ProjectFactory::new(self.graph.schema(source), exprs)?;
            source = self.add("project", Arc::new(factory), None, &[source])?;
        }
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let schema = self.graph.schema(source).clone();
        let p = Some(self.parallelism());
        if input.changelog && !matches!(grouping, Grouping::None) {
            return Err(SqlError::unsupported(
                "a window aggregate over a changelog (a GROUP BY without a window)",
                "window the inner aggregate instead, so that its rows are final",
            ));
        }
        let (node, window) = match grouping {
            Grouping::Call(WindowSpec::Session { gap }) => {
                let f = SessionAggregateFactory::new(&schema, &key_refs, gap, specs)?;
                let node = self.add("session_aggregate", Arc::new(f), p, &[source])?;
                (node, Some((WindowSpec::Session { gap }, None)))
            }
            Grouping::Call(spec) => {
                let f = WindowAggregateFactory::new(&schema, &key_refs, spec, specs)?;
                let node = self.add("window_aggregate", Arc::new(f), p, &[source])?;
                (node, Some((spec, None)))
            }
            Grouping::Column(w) => {
                let granule = w.granule().ok_or_else(|| {
                    SqlError::unsupported(
                        "grouping the result of a session window by its window",
                        "sessions of different keys do not line up; aggregate per key in the session query itself",
                    )
                })?;
                let spec = WindowSpec::Tumbling {
                    size: granule,
                    offset: w.offset(),
                };
                let f = WindowAggregateFactory::new(&schema, &key_refs, spec, specs)?;
                let node = self.add("window_aggregate", Arc::new(f), p, &[source])?;
                // The input window, to rebuild its start from the end.
                (node, Some((w.spec, Some(w.spec))))
            }
            Grouping::None if input.changelog => {
                let f = RetractingAggregateFactory::new(&schema, &key_refs, specs.clone())
                    .map_err(|e| {
                        SqlError::unsupported(
                            format!("this aggregate over a changelog ({e})"),
                            "count(DISTINCT x) once per column over a changelog; count, sum, avg, min and max take withdrawn rows back",
                        )
                    })?;
                let node = self.add("aggregate", Arc::new(f), p, &[source])?;
                (node, None)
            }
            Grouping::None => {
                let mut f = UpdatingAggregateFactory::new(&schema, &key_refs, specs.clone())?;
                if changelog && !specs.is_empty() {
                    f = f.changelog();
                }
                let node = self.add("aggregate", Arc::new(f), p, &[source])?;
                (node, None)
            }
        };
        // Fields in DataFusion's order: group expressions, then aggregates.
        let mut exprs = Vec::new();
        let mut windows = Vec::new();
        let mut k = 0;
        for i in 0..agg.group_expr.len() {
            let part = window_at.iter().find(|(at, _)| *at == i).map(|(_, p)| *p);
            if let (Some(part), Some((spec, rebuilt))) = (part, window) {
                let end = nanos_of("window_end");
                let start = match rebuilt {
                    Some(input) => start_from_end(input, end.clone()),
                    None => nanos_of("window_start"),
                };
                exprs.push(super::window_part(start, end, part));
                windows.push(Some(WindowColumn {
                    spec,
                    origin: WindowOrigin::Operator(node),
                    part,
                }));
            } else {
                exprs.push(col_expr(&keys[k]));
                windows.push(None);
                k += 1;
            }
        }
        let out_schema = self.graph.schema(node).schema.clone();
        for (j, name) in outputs.iter().enumerate() {
            let df = agg.schema.field(agg.group_expr.len() + j);
            let riffle = out_schema.field_with_name(name)?.data_type().clone();
            exprs.push(if &riffle == df.data_type() {
                col_expr(name)
            } else {
                cast(col_expr(name), df.data_type().clone())
            });
            windows.push(None);
        }
        // Updating per group: an unwindowed aggregate, or a DISTINCT over a changelog
        // (its rows leave when the last row holding them is withdrawn).
        let updating = (window.is_none() && (!agg.aggr_expr.is_empty() || input.changelog))
            .then(|| (0..agg.group_expr.len()).collect());
        let names = super::unique_names(agg.schema.fields().iter().map(|f| f.name().as_str()));
        let identity = exprs
            .iter()
            .zip(&names)
            .all(|(e, n)| matches!(e, Expr::Column(c) if &c.name == n));
        let node = if identity {
            node
        } else {
            let aliased: Vec<Expr> = exprs
                .into_iter()
                .zip(&names)
                .map(|(e, n)| e.alias(n))
                .collect();
            let f = ProjectFactory::new(self.graph.schema(node), aliased)?;
            self.add("project", Arc::new(f), None, &[node])?
        };
        let mut stream = Stream::of_node(node, names);
        stream.windows = windows;
        stream.changelog = (changelog || input.changelog) && updating.is_some();
        stream.updating = updating;
        Ok(stream)
    }

    /// The riffle column holding `e` (a column, or a computed value added to `pre`).
    fn input_column(
        &self,
        e: &Expr,
        input: &Stream,
        schema: &datafusion::common::DFSchema,
        pre: &mut Vec<(Expr, String)>,
        kind: &str,
    ) -> Result<String> {
        if let Expr::Column(c) = e {
            let i = schema.index_of_column(c)?;
            if !input.is_virtual(i) {
                return Ok(input.columns[i].clone());
            }
        }
        let rewritten = self.rewrite(e, input, schema)?;
        // The same expression twice (q16's filters) is computed once.
        if let Some((_, name)) = pre.iter().find(|(p, _)| *p == rewritten) {
            return Ok(name.clone());
        }
        let name = format!("__{kind}_{}", pre.len());
        pre.push((rewritten, name.clone()));
        Ok(name)
    }

    fn aggregate_spec(
        &self,
        e: &Expr,
        out: &str,
        input: &Stream,
        schema: &datafusion::common::DFSchema,
        pre: &mut Vec<(Expr, String)>,
    ) -> Result<AggregateSpec> {
        let inner = crate::windows::unaliased(e);
        let Expr::AggregateFunction(DfAggregate { func, params }) = inner else {
            return Err(SqlError::plan(format!("`{e}` is not an aggregate")));
        };
        let name = func.name().to_lowercase();
        if !params.order_by.is_empty() {
            return Err(SqlError::unsupported(
                format!("ORDER BY inside `{inner}`"),
                "riffle's aggregates do not depend on row order; drop the ORDER BY",
            ));
        }
        let function = match (name.as_str(), params.distinct) {
            ("count", true) => AggregateFunction::CountDistinct,
            ("count", false) => AggregateFunction::Count,
            ("sum", false) => AggregateFunction::Sum,
            ("min", _) => AggregateFunction::Min,
            ("max", _) => AggregateFunction::Max,
            ("avg" | "mean", false) => AggregateFunction::Avg,
            _ => {
                return Err(SqlError::unsupported(
                    format!("the aggregate `{inner}`"),
                    "riffle aggregates with count, count(DISTINCT …), sum, min, max and avg",
                ))
            }
        };
        // count(*) reaches the plan as count(1).
        let star = matches!(params.args.as_slice(), [] | [Expr::Literal(..)]);
        if function == AggregateFunction::Count && star && params.filter.is_none() {
            return Ok(AggregateSpec::count_star(out));
        }
        // count(DISTINCT x) FILTER (WHERE p) reads x and p apart: the aggregates that
        // count distinct values of the same x then keep one map between them.
        if let (AggregateFunction::CountDistinct, [arg], Some(p)) =
            (function, params.args.as_slice(), &params.filter)
        {
            let column = self.input_column(arg, input, schema, pre, "arg")?;
            let filter = self.input_column(p, input, schema, pre, "filter")?;
            return Ok(AggregateSpec::new(function, &column, out).with_filter(&filter));
        }
        let arg = match (params.args.as_slice(), &params.filter) {
            ([arg], None) => arg.clone(),
            // `agg(x) FILTER (WHERE p)` is `agg(CASE WHEN p THEN x END)`: every aggregate
            // riffle runs skips NULLs, and count(*) counts the rows where p holds.
            ([arg], Some(p)) => when(p.as_ref().clone(), arg.clone()).end()?,
            ([], Some(p)) => when(p.as_ref().clone(), lit(1i64)).end()?,
            _ => return Err(SqlError::plan(format!("`{inner}` takes one argument"))),
        };
        let arg = &arg;
        // avg's input is coerced to DOUBLE; riffle averages integers exactly as they are.
        let arg = match (function, arg) {
            (AggregateFunction::Avg, Expr::Cast(c))
                if matches!(c.expr.as_ref(), Expr::Column(_))
                    && c.expr.get_type(schema).is_ok_and(|t| t.is_integer()) =>
            {
                c.expr.as_ref()
            }
            (_, arg) => arg,
        };
        let column = self.input_column(arg, input, schema, pre, "arg")?;
        Ok(AggregateSpec::new(function, &column, out))
    }

    /// q4's shape: `max(right.v)` per left row of `left JOIN right ON key WHERE
    /// right.time BETWEEN left.a AND left.b`, grouped by left columns including the key.
    fn interval_max(&mut self, agg: &Aggregate) -> Result<Option<Stream>> {
        super::interval::interval_max(self, agg)
    }
}

/// The plan under aliases.
pub(super) fn peel(plan: &LogicalPlan) -> &LogicalPlan {
    match plan {
        LogicalPlan::SubqueryAlias(a) => peel(&a.input),
        p => p,
    }
}

/// The start (Int64 nanoseconds) of a window of `spec` from its `end`: `size` before it
/// for tumbles and hops, the multiple of `max` below it for cumulates.
fn start_from_end(spec: WindowSpec, end: Expr) -> Expr {
    match spec {
        WindowSpec::Tumbling { size, .. } | WindowSpec::Hopping { size, .. } => {
            end - nanos_lit(size)
        }
        WindowSpec::Cumulating { max, .. } => {
            let last = end - lit(1i64);
            let max = nanos_lit(max);
            last.clone() - ((last % max.clone()) + max.clone()) % max
        }
        // Grouping a session result by its window is refused before this.
        WindowSpec::Session { .. } => nanos_of("window_start"),
    }
}
