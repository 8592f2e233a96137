//! Translates optimized DataFusion logical plans into a riffle [`JobGraph`].
//!
//! Every plan node becomes a [`Stream`]: a riffle node plus, for each field of the
//! DataFusion schema, the riffle column holding it. Riffle operators address columns by
//! name, so column-only projections and aliases cost nothing: they only remap fields.
//! Plans are memoized, so a view or a table used twice becomes one branch of the
//! dataflow that feeds both consumers.

mod aggregate;
mod changelog_join;
mod expand;
mod interval;
mod join;
mod lookup;
mod max_rows;
mod numbers;
mod over;
mod plan_shape;
mod stream;
mod text;
mod top_n;
mod union;
mod window_parts;

use crate::connectors::SourceTable;
use crate::error::{Result, SqlError};
use crate::windows::window_call;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, ScalarValue};
use datafusion::functions::core::expr_fn::named_struct;
use datafusion::logical_expr::{cast, lit, Expr, LogicalPlan, Projection, Volatility};
use riffle_core::arrow::datatypes::DataType;
use riffle_core::{LookupTableFactory, OperatorFactory, TIMESTAMP_FIELD};
use riffle_operators::{FilterFactory, ProjectFactory, UpsertNormalizeFactory, WindowSpec};
use riffle_runtime::{JobGraph, NodeId};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

pub use stream::{Stream, WindowColumn, WindowOrigin, WindowPart, VIRTUAL_PREFIX};
use window_parts::PartField;

/// Builds the dataflow of one pipeline, statement by statement.
pub struct Translator<'a> {
    /// The graph built so far.
    pub graph: JobGraph,
    parallelism: usize,
    sources: &'a HashMap<String, SourceTable>,
    lookups: &'a HashMap<String, Arc<dyn LookupTableFactory>>,
    source_nodes: HashMap<String, NodeId>,
    memo: HashMap<LogicalPlan, Stream>,
    /// Every source is read in processing time: rows carry the time they were read, the
    /// tables' event-time columns are plain columns, and `PROCTIME()` is the row's time.
    pub processing_time: bool,
    names: HashMap<&'static str, usize>,
    /// The node being translated feeds a filter or an aggregate through projections
    /// only: an unwindowed aggregate there emits a changelog, so that what reads it can
    /// withdraw rows (see `translate_as_changelog`).
    changelog_wanted: bool,
}

impl<'a> Translator<'a> {
    /// A translator adding nodes of `parallelism` to `graph`.
    pub fn new(
        graph: JobGraph,
        parallelism: usize,
        sources: &'a HashMap<String, SourceTable>,
        lookups: &'a HashMap<String, Arc<dyn LookupTableFactory>>,
    ) -> Self {
        Self {
            graph,
            parallelism,
            sources,
            lookups,
            source_nodes: HashMap::new(),
            memo: HashMap::new(),
            processing_time: false,
            names: HashMap::new(),
            changelog_wanted: false,
        }
    }

    /// The stream a plan produces.
    ///
    /// # Errors
    /// Constructs riffle does not run on streams, named, with a hint.
    pub fn translate(&mut self, plan: &LogicalPlan) -> Result<Stream> {
        if let Some(s) = self.memo.get(plan) {
            // A result translated for a reader of replaced rows is translated again for
            // one that needs their withdrawals (a second INSERT of a shared view).
            if !(self.changelog_wanted && s.updating.is_some() && !s.changelog) {
                return Ok(s.clone());
            }
        }
        // Only nodes that pass a changelog through unchanged hand the wish down.
        let wanted = std::mem::take(&mut self.changelog_wanted);
        self.changelog_wanted = wanted
            && matches!(
                plan,
                LogicalPlan::Projection(_)
                    | LogicalPlan::SubqueryAlias(_)
                    | LogicalPlan::Aggregate(_)
                    | LogicalPlan::Filter(_)
            );
        let stream = match plan {
            LogicalPlan::TableScan(scan) => self.scan(scan)?,
            LogicalPlan::SubqueryAlias(a) => self.translate(&a.input)?,
            LogicalPlan::Projection(p) => self.projection(p)?,
            LogicalPlan::Filter(f) => match self.top_n(f)? {
                Some(top) => top,
                None => {
                    let input = self.translate_as_changelog(&f.input)?;
                    self.filter(&input, &f.predicate, f.input.schema())?
                }
            },
            LogicalPlan::Aggregate(a) => self.aggregate(a)?,
            LogicalPlan::Join(j) => match self.lookup_join(j)? {
                Some(joined) => joined,
                None => self.join(j)?,
            },
            LogicalPlan::Sort(_) => {
                return Err(SqlError::unsupported(
                    "ORDER BY",
                    "a stream never ends, so it cannot be sorted; to keep the top rows per window, join a window's rows with its max (see docs/sql.md, q7)",
                ))
            }
            LogicalPlan::Limit(_) => {
                return Err(SqlError::unsupported(
                    "LIMIT",
                    "remove it; bound the input instead (e.g. the nexmark 'events' option)",
                ))
            }
            LogicalPlan::Window(w) => self.over(w)?,
            LogicalPlan::Union(u) => self.union(u)?,
            LogicalPlan::Distinct(_) => {
                return Err(SqlError::unsupported(
                    "DISTINCT ON",
                    "use GROUP BY with the columns that must be distinct",
                ))
            }
            LogicalPlan::Values(_) | LogicalPlan::EmptyRelation(_) => {
                return Err(SqlError::unsupported(
                    "a query without a source table",
                    "select FROM a table declared with a connector",
                ))
            }
            other => {
                return Err(SqlError::unsupported(
                    format!("`{}`", other.display()),
                    "see docs/sql.md for what riffle SQL runs",
                ))
            }
        };
        self.memo.insert(plan.clone(), stream.clone());
        Ok(stream)
    }

    /// A fresh stable operator id such as `project_3`.
    pub(crate) fn name(&mut self, kind: &'static str) -> String {
        let n = self.names.entry(kind).or_insert(0);
        *n += 1;
        format!("{kind}_{n}")
    }

    /// Parallelism of keyed operators.
    /// The stream of `plan`, read by a filter or an aggregate: an unwindowed aggregate
    /// or a Top-N at its top (through projections) emits a changelog, whose withdrawn
    /// rows the reader can pass on or take back.
    pub(crate) fn translate_as_changelog(&mut self, plan: &LogicalPlan) -> Result<Stream> {
        self.changelog_wanted = true;
        let stream = self.translate(plan);
        self.changelog_wanted = false;
        stream
    }

    pub(crate) fn parallelism(&self) -> usize {
        self.parallelism
    }

    /// Adds an operator on `inputs`; stateless operators follow their input's parallelism.
    pub(crate) fn add(
        &mut self,
        kind: &'static str,
        factory: Arc<dyn OperatorFactory>,
        parallelism: Option<usize>,
        inputs: &[NodeId],
    ) -> Result<NodeId> {
        let p = parallelism.unwrap_or_else(|| self.graph.nodes()[inputs[0].0].parallelism);
        let name = self.name(kind);
        Ok(self.graph.operator(&name, factory, p, inputs)?)
    }

    fn scan(&mut self, scan: &datafusion::logical_expr::TableScan) -> Result<Stream> {
        let table = scan.table_name.table().to_string();
        if self.lookups.contains_key(&table) {
            return Err(SqlError::unsupported(
                format!("reading the lookup table `{table}` other than by key"),
                format!("a table joined FOR SYSTEM_TIME AS OF is read only by that join: JOIN {table} FOR SYSTEM_TIME AS OF s.proc_time AS d ON s.k = d.k, with {table} on the right"),
            ));
        }
        let source = self.sources.get(&table).ok_or_else(|| {
            SqlError::plan(format!("`{table}` is not a source table of this pipeline"))
        })?;
        if scan.fetch.is_some() {
            return Err(SqlError::unsupported("LIMIT", "remove it"));
        }
        let node = match self.source_nodes.get(&table) {
            Some(n) => *n,
            None => {
                let p = self.parallelism;
                let mut n =
                    self.graph
                        .source(&table, source.factory.clone(), p, source.watermarks)?;
                if let Some(key) = &source.upsert_key {
                    // Upserts and deletes by key become a changelog, keyed by the key.
                    let refs: Vec<&str> = key.iter().map(String::as_str).collect();
                    let factory = UpsertNormalizeFactory::new(self.graph.schema(n), &refs)?;
                    n = self.add("upsert_normalize", Arc::new(factory), Some(p), &[n])?;
                }
                self.source_nodes.insert(table.clone(), n);
                n
            }
        };
        let schema = self.graph.schema(node).schema.clone();
        let all: Vec<String> = schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .filter(|n| n != TIMESTAMP_FIELD)
            .collect();
        let columns: Vec<String> = match &scan.projection {
            Some(indices) => indices.iter().map(|&i| all[i].clone()).collect(),
            None => all,
        };
        let mut stream = Stream::of_node(node, columns);
        if !self.processing_time {
            stream.event_time = stream.columns.iter().position(|c| *c == source.event_time);
        }
        if self.graph.schema(node).row_kind_index().is_some() {
            // A source of change events (Debezium): a changelog without a key of its own;
            // an upsert topic's, keyed by its primary key (while the query keeps it).
            stream.make_keyless_changelog();
            let key = source.upsert_key.as_deref().unwrap_or_default();
            let at: Option<Vec<usize>> = key
                .iter()
                .map(|k| stream.columns.iter().position(|c| c == k))
                .collect();
            if let Some(at) = at {
                stream.updating = Some(at);
            }
        }
        if let Some(predicate) = scan.filters.iter().cloned().reduce(|a, b| a.and(b)) {
            stream = self.filter(&stream, &predicate, &scan.projected_schema)?;
        }
        Ok(stream)
    }

    fn filter(&mut self, input: &Stream, predicate: &Expr, schema: &DFSchema) -> Result<Stream> {
        // A changelog's filter withdraws a row by passing its `-U`; rows that only replace
        // earlier rows cannot be withdrawn (a Top-N's).
        if input.updating.is_some() && !input.changelog {
            return Err(SqlError::unsupported(
                format!("filtering an updating result that is not a changelog (`{predicate}` over an OVER window of an unwindowed GROUP BY)"),
                "filter the rows the OVER window reads",
            ));
        }
        let input = &self.expand_if_read(input, [predicate], schema)?;
        refuse_changing_values(input, [predicate])?;
        let predicate = self.rewrite(predicate, input, schema)?;
        let factory = FilterFactory::new(self.graph.schema(input.node), predicate)?;
        let node = self.add("filter", Arc::new(factory), None, &[input.node])?;
        Ok(input.filtered(node))
    }

    fn projection(&mut self, p: &Projection) -> Result<Stream> {
        let input = self.translate(&p.input)?;
        let in_schema = p.input.schema();
        let input = self.expand_if_read(&input, &p.expr, in_schema)?;
        refuse_changing_values(&input, &p.expr)?;
        let mut out = input.clone();
        out.columns.clear();
        out.windows.clear();
        out.origin_columns.clear();
        out.event_time = None;
        // (riffle name, expression) of each output; None while every output is a column.
        let mut computed: Vec<(Expr, Option<WindowColumn>, Option<String>)> = Vec::new();
        let mut physical = false;
        for (i, e) in p.expr.iter().enumerate() {
            let inner = crate::windows::unaliased(e);
            if let Expr::Column(c) = inner {
                let k = in_schema.index_of_column(c)?;
                computed.push((
                    col_expr(&input.columns[k]),
                    input.windows[k],
                    input.origin_columns[k].clone(),
                ));
                if input.event_time == Some(k) {
                    out.event_time = Some(i);
                }
            } else if let Some(part) = self.window_part_field(inner, &input, in_schema)? {
                match part {
                    PartField::Virtual(w) => {
                        computed.push((col_expr(&format!("{VIRTUAL_PREFIX}{i}")), Some(w), None))
                    }
                    PartField::Computed(e, w) => {
                        computed.push((e, Some(w), None));
                        physical = true;
                    }
                }
            } else if let Some(spec) = window_call(inner)? {
                let WindowSpec::Tumbling { .. } = spec else {
                    return Err(SqlError::unsupported(
                        format!("`{inner}` outside GROUP BY"),
                        "a row falls in several hopping or cumulating windows and sessions need grouping: use hop()/cumulate()/session() in GROUP BY; tumble() may tag rows",
                    ));
                };
                let name = format!("{VIRTUAL_PREFIX}{i}");
                computed.push((
                    col_expr(&name),
                    Some(WindowColumn {
                        spec,
                        origin: WindowOrigin::PerRow,
                        part: WindowPart::Whole,
                    }),
                    None,
                ));
            } else if self.processing_time && is_proctime(inner) {
                // The time the source stamped the row with, so that a window on this
                // column and the column's value agree.
                let stamp = cast(
                    col_expr(TIMESTAMP_FIELD),
                    DataType::Timestamp(datafusion::arrow::datatypes::TimeUnit::Millisecond, None),
                );
                computed.push((stamp, None, None));
                out.event_time = Some(i);
                physical = true;
            } else {
                computed.push((self.rewrite(inner, &input, in_schema)?, None, None));
                physical = true;
            }
        }
        if !physical {
            // Every output is a column (or virtual): remap, no operator.
            for (e, w, o) in computed {
                out.columns.push(match e {
                    Expr::Column(c) => c.name,
                    other => other.schema_name().to_string(),
                });
                out.windows.push(w);
                out.origin_columns.push(o);
            }
            out.updating = remap_keys(&input, &p.expr, in_schema)?;
            return Ok(out);
        }
        // Virtual fields stay virtual; the rest become columns.
        let mut names = unique_names(p.schema.fields().iter().map(|f| f.name().as_str()));
        let mut exprs: Vec<Expr> = Vec::new();
        for ((e, _, _), n) in computed.iter().zip(names.iter_mut()) {
            match e {
                Expr::Column(c) if c.name.starts_with(VIRTUAL_PREFIX) => *n = c.name.clone(),
                e => exprs.push(e.clone().alias(n.as_str())),
            }
        }
        let factory = ProjectFactory::new(self.graph.schema(input.node), exprs)?;
        let node = self.add("project", Arc::new(factory), None, &[input.node])?;
        out.node = node;
        out.columns = names;
        for (_, w, o) in computed {
            out.windows.push(w);
            out.origin_columns.push(o);
        }
        out.updating = remap_keys(&input, &p.expr, in_schema)?;
        Ok(out)
    }

    /// `stream` with its virtual window fields (except windows `keep`) turned into
    /// columns, for operators that buffer or key on columns.
    pub(crate) fn materialize_unless(
        &mut self,
        stream: &Stream,
        keep: Option<WindowSpec>,
    ) -> Result<Stream> {
        let stream = &self.expand_windows(stream, keep)?;
        let needed = |i: usize| stream.is_virtual(i) && stream.windows[i].map(|w| w.spec) != keep;
        if !(0..stream.columns.len()).any(needed) {
            return Ok(stream.clone());
        }
        let mut out = stream.clone();
        let mut exprs: Vec<Expr> = stream
            .physical_columns()
            .iter()
            .map(|c| col_expr(c))
            .collect();
        let mut taken = stream.physical_columns();
        for i in 0..stream.columns.len() {
            if needed(i) {
                let name = fresh_name("w", &taken);
                exprs.push(field_expr(stream, i)?.alias(&name));
                taken.push(name.clone());
                out.columns[i] = name;
            }
        }
        let factory = ProjectFactory::new(self.graph.schema(stream.node), exprs)?;
        out.node = self.add("project", Arc::new(factory), None, &[stream.node])?;
        Ok(out)
    }

    /// `stream` narrowed to the columns its fields read, so a keyed exchange or a join
    /// buffer carries only those (sources emit every column; DataFusion's projection
    /// pushdown only says which are needed).
    pub(crate) fn prune(&mut self, stream: &Stream) -> Result<Stream> {
        let needed = stream.physical_columns();
        let schema = self.graph.schema(stream.node).clone();
        if schema.schema.fields().len() <= needed.len() + 1 {
            return Ok(stream.clone());
        }
        let exprs = needed.iter().map(|c| col_expr(c)).collect();
        let factory = ProjectFactory::new(&schema, exprs)?;
        let mut out = stream.clone();
        out.node = self.add("project", Arc::new(factory), None, &[stream.node])?;
        Ok(out)
    }

    /// `expr` over `schema` (the DataFusion input of the node) with columns renamed to
    /// the riffle columns of `input`.
    pub(crate) fn rewrite(&self, expr: &Expr, input: &Stream, schema: &DFSchema) -> Result<Expr> {
        text::refuse_timestamp_text(expr, schema)?;
        let expr = text::values_as_flink_text(expr, schema)?;
        let expr = numbers::values_as_flink_numbers(&expr, schema)?;
        let mut failure: Option<SqlError> = None;
        let rewritten = expr
            .transform_up(|e| {
                // A row's own tumbling window (the optimizer may move `w['start']` next
                // to the `tumble(…)` that made `w`).
                match window_call(&e) {
                    Ok(None) => {}
                    Ok(Some(WindowSpec::Tumbling { size, offset })) => {
                        return Ok(Transformed::yes(row_window(size, offset)))
                    }
                    Ok(Some(_)) => {
                        failure = Some(SqlError::unsupported(
                            format!("`{e}` outside GROUP BY"),
                            "a row falls in several hopping or cumulating windows and sessions need grouping: use hop()/cumulate()/session() as a GROUP BY item (aliased, e.g. AS w) and read w['start'] / w['end'] from the result",
                        ));
                        return Ok(Transformed::no(e));
                    }
                    Err(wrong) => {
                        failure = Some(wrong);
                        return Ok(Transformed::no(e));
                    }
                }
                Ok(match e {
                    Expr::Column(c) => match schema.index_of_column(&c) {
                        Ok(i) => match field_expr(input, i) {
                            Ok(e) => Transformed::yes(e),
                            Err(e) => {
                                failure = Some(e);
                                Transformed::no(Expr::Column(c))
                            }
                        },
                        Err(e) => {
                            failure = Some(e.into());
                            Transformed::no(Expr::Column(c))
                        }
                    },
                    Expr::ScalarSubquery(_)
                    | Expr::Exists(_)
                    | Expr::InSubquery(_)
                    | Expr::OuterReferenceColumn(..) => {
                        failure = Some(SqlError::unsupported(
                            format!("the subquery in `{e}`"),
                            "write it as a join",
                        ));
                        Transformed::no(e)
                    }
                    other => Transformed::no(other),
                })
            })?
            .data;
        match failure {
            Some(f) => Err(f),
            None => Ok(self.coerced(rewritten, input)),
        }
    }

    /// `expr` with the casts its operands need on `input`'s own columns. DataFusion
    /// coerced it for the logical types, which can differ from the columns riffle
    /// computes: `ROW_NUMBER()` is UInt64 to DataFusion and BIGINT (Int64) to Flink and
    /// riffle's Top-N, so `rn > 1` arrives as `rn > UInt64(1)`.
    fn coerced(&self, expr: Expr, input: &Stream) -> Expr {
        use datafusion::common::tree_node::TreeNode;
        use datafusion::optimizer::analyzer::type_coercion::TypeCoercionRewriter;
        let physical = &self.graph.schema(input.node).schema;
        let Ok(schema) = DFSchema::try_from(physical.as_ref().clone()) else {
            return expr;
        };
        // An expression coercion cannot type fails where it is compiled, naming itself.
        match expr
            .clone()
            .rewrite(&mut TypeCoercionRewriter::new(&schema))
        {
            Ok(coerced) => coerced.data,
            Err(_) => expr,
        }
    }
}

/// The value of field `i` of `stream`: its column, or a virtual window (part) computed
/// from the event time.
///
/// # Errors
/// A virtual field of a window that is not one per row (hop), read outside GROUP BY.
pub(crate) fn field_expr(stream: &Stream, i: usize) -> Result<Expr> {
    match stream.windows[i] {
        Some(w) if stream.is_virtual(i) => window_parts::virtual_value(w, &stream.columns[i]),
        _ => Ok(col_expr(&stream.columns[i])),
    }
}

/// Part `part` of the tumbling window of `size` (starting `offset` after its multiples)
/// holding each row's event time.
pub(crate) fn field_expr_bounds(size: Duration, offset: Duration, part: WindowPart) -> Expr {
    let (start, end) = row_window_bounds(size, offset);
    window_part(start, end, part)
}

/// Part `part` of the window from `start` to `end` (nanoseconds, Int64 expressions).
pub(crate) fn window_part(start: Expr, end: Expr, part: WindowPart) -> Expr {
    let ts = riffle_core::timestamp_type();
    match part {
        WindowPart::Whole => window_struct(start, end),
        WindowPart::Start => cast(start, ts),
        WindowPart::End => cast(end, ts),
        WindowPart::Time => cast(end - lit(crate::windows::WINDOW_TIME_BEFORE_END_NANOS), ts),
    }
}

/// A column reference by riffle name (never split at dots).
pub(crate) fn col_expr(name: &str) -> Expr {
    Expr::Column(Column::new_unqualified(name))
}

/// `{start, end}` of the tumbling window of `size` holding each row's event time.
fn row_window(size: Duration, offset: Duration) -> Expr {
    let (start, end) = row_window_bounds(size, offset);
    window_struct(start, end)
}

/// Start and end nanoseconds (Int64) of the tumbling window of `size`, starting
/// `offset` after its multiples, holding each row's event time.
fn row_window_bounds(size: Duration, offset: Duration) -> (Expr, Expr) {
    let nanos = i64::try_from(size.as_nanos()).unwrap_or(i64::MAX);
    let offset = i64::try_from(offset.as_nanos()).unwrap_or(0);
    let ts = cast(col_expr(TIMESTAMP_FIELD), DataType::Int64);
    let shifted = ts.clone() - lit(offset);
    let start = ts - ((shifted % lit(nanos)) + lit(nanos)) % lit(nanos);
    (start.clone(), start + lit(nanos))
}

/// The window struct from start and end nanoseconds (Int64 expressions).
pub(crate) fn window_struct(start: Expr, end: Expr) -> Expr {
    let ts = riffle_core::timestamp_type();
    named_struct(vec![
        lit("start"),
        cast(start, ts.clone()),
        lit("end"),
        cast(end, ts),
    ])
}

/// Nanoseconds of a timestamp column as Int64.
pub(crate) fn nanos_of(column: &str) -> Expr {
    cast(col_expr(column), DataType::Int64)
}

/// A literal of `d` in nanoseconds.
pub(crate) fn nanos_lit(d: Duration) -> Expr {
    Expr::Literal(
        ScalarValue::Int64(Some(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))),
        None,
    )
}

/// Column names made unique by suffixing `_2`, `_3`, … and never `_timestamp`.
pub(crate) fn unique_names<'n>(names: impl Iterator<Item = &'n str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in names {
        let base = if n == TIMESTAMP_FIELD { "timestamp" } else { n };
        out.push(fresh_name(base, &out));
    }
    out
}

/// Refuses expressions over a changelog whose value may differ between a row and its
/// withdrawal (`random()`, `PROCTIME()`, `now()`): the withdrawn row would not equal the
/// row it withdraws, and a join, Top-N, aggregate or keyed table downstream could not
/// find it (Flink calls this a non-deterministic update).
fn refuse_changing_values<'e>(
    input: &Stream,
    exprs: impl IntoIterator<Item = &'e Expr>,
) -> Result<()> {
    if !input.changelog {
        return Ok(());
    }
    for e in exprs {
        let mut found = None;
        e.apply(|e| {
            if let Expr::ScalarFunction(f) = e {
                if f.func.signature().volatility != Volatility::Immutable {
                    found = Some(f.func.name().to_string());
                    return Ok(TreeNodeRecursion::Stop);
                }
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        if let Some(name) = found {
            return Err(SqlError::unsupported(
                format!("`{name}()` over a changelog (its value for a withdrawn row would differ from the row it withdraws)"),
                "compute it before the aggregate, join or Top-N that makes the changelog, or drop it",
            ));
        }
    }
    Ok(())
}

/// Whether `e` is a call of `PROCTIME()`.
fn is_proctime(e: &Expr) -> bool {
    matches!(e, Expr::ScalarFunction(f) if f.func.name() == "proctime")
}

/// `base`, or `base_2`, `base_3`, … : the first not in `taken`.
pub(crate) fn fresh_name(base: &str, taken: &[String]) -> String {
    let mut name = base.to_string();
    let mut k = 2;
    while taken.contains(&name) {
        name = format!("{base}_{k}");
        k += 1;
    }
    name
}

/// The updating keys of a projection's output: each input key must pass through.
fn remap_keys(input: &Stream, exprs: &[Expr], schema: &DFSchema) -> Result<Option<Vec<usize>>> {
    let Some(keys) = &input.updating else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for &k in keys {
        let at = exprs.iter().position(|e| {
            let inner = crate::windows::unaliased(e);
            matches!(inner, Expr::Column(c) if schema.index_of_column(c).ok() == Some(k))
        });
        match at {
            Some(i) => out.push(i),
            // A changelog withdraws rows by their whole value, so it stays exact without
            // its key; only sinks that update by key need one (and then refuse).
            None if input.changelog => return Ok(Some(Vec::new())),
            None => {
                return Err(SqlError::plan(format!(
                    "the result is updated per `{}`, but the query drops that column; keep it in the SELECT list (the GROUP BY columns, or the row number of a Top-N of more than one row)",
                    schema.field(k).name()
                )))
            }
        }
    }
    Ok(Some(out))
}
