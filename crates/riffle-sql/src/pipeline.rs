//! Plans a whole pipeline file into one [`JobGraph`].

use crate::case_lookup::case_lookups;
use crate::connectors::{ConnectorRegistry, RunSettings, SinkTable, SourceTable};
use crate::ddl::{object_name, start_of, table_def, TableDef};
use crate::error::{Location, Result, SqlError};
use crate::script;
use crate::shared_work::share_filter_work;
use crate::sink_attach::attach_sink;
use crate::time_bounds::time_bounds;
use crate::translate::Translator;
use crate::windows::window_udfs;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::empty::EmptyTable;
use datafusion::catalog::view::ViewTable;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::TableReference;
use datafusion::execution::SessionStateBuilder;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{Insert, Query, Statement, TableObject};
use riffle_connectors::ProcessingTimeSourceFactory;
use riffle_core::LookupTableFactory;
use riffle_runtime::JobGraph;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How to plan a pipeline.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// The pipeline's name (its state lives under it).
    pub name: String,
    /// Subtasks of sources and keyed operators.
    pub parallelism: usize,
    /// Key groups.
    pub max_parallelism: u16,
    /// Command-line overrides of table options.
    pub settings: RunSettings,
}

/// A planned pipeline.
pub struct SqlPipeline {
    /// The dataflow.
    pub graph: JobGraph,
    /// Rows the sources will produce, when known (for progress).
    pub expected_rows: Option<u64>,
    /// Sink tables written, in statement order.
    pub sinks: Vec<String>,
    /// Time spent planning (parse, DataFusion, translation).
    pub planning_time: Duration,
}

/// DataFusion turns `count(DISTINCT x)` into two aggregates; riffle counts distinct
/// values in one (and the inner aggregate would be an updating one).
const SKIPPED_RULES: [&str; 1] = ["single_distinct_aggregation_to_group_by"];

fn session() -> SessionContext {
    // Identifiers keep their case, as in Flink SQL (`script::normalize`).
    let mut config = datafusion::prelude::SessionConfig::new();
    config.options_mut().sql_parser.enable_ident_normalization = false;
    // `0.908` is DECIMAL(3, 3) as in Flink, so `0.908 * price` is exact (Nexmark q1).
    config.options_mut().sql_parser.parse_float_as_decimal = true;
    let state = SessionContext::new_with_config(config).state();
    let rules = state
        .optimizers()
        .iter()
        .filter(|r| !SKIPPED_RULES.contains(&r.name()))
        .cloned()
        .collect();
    let state = SessionStateBuilder::new_from_existing(state)
        .with_optimizer_rules(rules)
        .build();
    let ctx = SessionContext::new_with_state(state);
    for udf in window_udfs() {
        ctx.register_udf(udf);
    }
    ctx.register_udf(crate::windows::window_time_udf());
    ctx.register_udaf(crate::functions::avg_udaf());
    for udf in crate::functions::flink_udfs() {
        ctx.register_udf(udf);
    }
    ctx
}

/// Plans `text` (the contents of a pipeline file).
///
/// # Errors
/// Syntax and planning errors with line and column, unsupported constructs named with a
/// hint, connector option errors naming the table.
pub fn plan_pipeline(
    text: &str,
    options: &PlanOptions,
    registry: &ConnectorRegistry,
) -> Result<SqlPipeline> {
    plan_text(text, options, registry).map_err(|e| point_at_unknown_name(e, text))
}

/// DataFusion names an unknown column without a position: find it in the statement
/// the error is located at, so the message points at the word itself.
fn point_at_unknown_name(error: SqlError, text: &str) -> SqlError {
    let SqlError::Plan {
        at: Some(at),
        message,
        hint,
    } = error
    else {
        return error;
    };
    let name = message.split_once("No field named ").map(|(_, rest)| {
        rest.trim_start_matches('"')
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .next()
            .unwrap_or_default()
            .to_string()
    });
    let found = name.filter(|n| !n.is_empty()).and_then(|name| {
        text.lines()
            .enumerate()
            .skip(at.line.saturating_sub(1) as usize)
            .find_map(|(i, line)| {
                let lower = line.to_lowercase();
                let mut from = 0;
                while let Some(p) = lower[from..].find(&name) {
                    let start = from + p;
                    let end = start + name.len();
                    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                    if !word(lower[..start].chars().last()) && !word(lower[end..].chars().next()) {
                        return Some(Location {
                            line: i as u64 + 1,
                            column: lower[..start].chars().count() as u64 + 1,
                        });
                    }
                    from = end;
                }
                None
            })
    });
    SqlError::Plan {
        at: Some(found.unwrap_or(at)),
        message,
        hint,
    }
}

/// Refuses two tables written by one pipeline that name one output (a directory, or
/// one inside the other; an Iceberg or PostgreSQL table; a Kafka topic): their sinks
/// would write the same file names or tables and tear or lose each other's committed
/// rows (docs/engine.md, "One owner per output").
fn refuse_shared_outputs(sinks: &HashMap<String, (TableDef, SinkTable)>) -> Result<()> {
    let mut tables: Vec<(&String, &(TableDef, SinkTable))> = sinks.iter().collect();
    tables.sort_by_key(|(name, _)| name.as_str());
    let places: Vec<(usize, riffle_core::OutputPlace)> = tables
        .iter()
        .enumerate()
        .flat_map(|(i, (_, (_, sink)))| {
            sink.factory
                .output_places()
                .into_iter()
                .map(move |p| (i, p))
        })
        .collect();
    let Some(&(a, b)) = riffle_core::overlapping_outputs(&places).first() else {
        return Ok(());
    };
    let (name_a, (def_a, sink_a)) = tables[a];
    let (name_b, (_, sink_b)) = tables[b];
    Err(SqlError::Plan {
        at: def_a.at,
        message: format!(
            "tables `{name_a}` ({}) and `{name_b}` ({}) are both written by this pipeline and name the same output: two sinks writing one place tear or lose each other's committed rows",
            sink_a.factory.describe(),
            sink_b.factory.describe()
        ),
        hint: Some(format!(
            "give each table its own output (another directory, table or topic); to write both results into one, INSERT INTO `{name_a}` SELECT … UNION ALL SELECT …"
        )),
    })
}

fn plan_text(
    text: &str,
    options: &PlanOptions,
    registry: &ConnectorRegistry,
) -> Result<SqlPipeline> {
    let started = Instant::now();
    let script = script::parse(text)?;
    let targets: HashSet<String> = script
        .statements
        .iter()
        .filter_map(|s| match s {
            Statement::Insert(Insert {
                table: TableObject::TableName(name),
                ..
            }) => Some(object_name(name)),
            _ => None,
        })
        .collect();
    let ctx = session();
    let mut sources: HashMap<String, SourceTable> = HashMap::new();
    let mut lookups: HashMap<String, Arc<dyn LookupTableFactory>> = HashMap::new();
    let mut sinks: HashMap<String, (TableDef, SinkTable)> = HashMap::new();
    let mut expected_rows: Option<u64> = None;
    // Tables first, so views and queries may name a table declared further down.
    for statement in &script.statements {
        let Statement::CreateTable(create) = statement else {
            continue;
        };
        let def = table_def(create, &script)?;
        let at = def.at;
        let connector = registry.connector_for(&def).map_err(|e| e.located(at))?;
        if !def.partitioned_by.is_empty() && !connector.writes_partitions() {
            return Err(SqlError::unsupported(
                format!("PARTITIONED BY on `{}` ('connector' = '{}')", def.name, connector.name()),
                "only the filesystem and iceberg connectors write partitions; drop the clause, or write one table per partition value with a WHERE filter",
            )
            .located(at));
        }
        if targets.contains(&def.name) {
            let sink = connector.sink(&def, &options.name)?;
            sinks.insert(def.name.clone(), (def, sink));
            continue;
        }
        if let Some(clause) = script.lookups.iter().find(|l| l.table == def.name) {
            let lookup = connector
                .lookup(&def)
                .map_err(|e| e.located(Some(clause.at)))?;
            ctx.register_table(
                TableReference::bare(def.name.clone()),
                Arc::new(EmptyTable::new(lookup.schema())),
            )
            .map_err(|e| SqlError::from(e).located(at))?;
            lookups.insert(def.name.clone(), lookup);
            continue;
        }
        let mut source = connector.source(&def, &options.settings)?;
        if script.processing_time {
            source.factory = Arc::new(ProcessingTimeSourceFactory::new(source.factory));
            source.watermarks.max_out_of_orderness = Duration::ZERO;
        }
        let mut fields: Vec<_> = source
            .factory
            .output_schema()
            .user_fields()
            .map(|f| f.as_ref().clone())
            .collect();
        // SQL may read the columns by other names; the translator maps fields to the
        // source's columns by position.
        if let Some(names) = &source.sql_names {
            for (f, n) in fields.iter_mut().zip(names) {
                *f = f.clone().with_name(n);
            }
        }
        let schema: SchemaRef = Arc::new(Schema::new(fields));
        ctx.register_table(
            TableReference::bare(def.name.clone()),
            Arc::new(EmptyTable::new(schema)),
        )
        .map_err(|e| SqlError::from(e).located(at))?;
        expected_rows = match (expected_rows, source.expected_rows) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        sources.insert(def.name.clone(), source);
    }
    refuse_shared_outputs(&sinks)?;
    // Functions declared as SQL expressions, in file order (a body may call an earlier one).
    let mut macros: Vec<crate::functions::SqlMacro> = Vec::new();
    for statement in &script.statements {
        if let Statement::CreateFunction(create) = statement {
            let m = crate::functions::define(create, &macros)
                .map_err(|e| e.located(start_of(statement)))?;
            macros.push(m);
        }
    }
    let mut graph = JobGraph::new(options.name.clone());
    graph.max_parallelism = options.max_parallelism;
    if let Some(clause) = script
        .lookups
        .iter()
        .find(|l| !lookups.contains_key(&l.table))
    {
        return Err(SqlError::Plan {
            at: Some(clause.at),
            message: format!("`{}` is joined FOR SYSTEM_TIME AS OF but not declared", clause.table),
            hint: Some(format!("declare it: CREATE TABLE {} (…) WITH ('connector' = 'postgres' or 'filesystem', …)", clause.table)),
        });
    }
    // Every INSERT planned first, so that each source reads only the columns some
    // statement uses.
    let mut inserts = Vec::new();
    for statement in &script.statements {
        let at = start_of(statement);
        match statement {
            Statement::CreateTable(_) | Statement::CreateFunction(_) => {}
            Statement::CreateView(view) => {
                let plan = logical_plan(&ctx, &view.query, &macros).map_err(|e| e.located(at))?;
                let name = object_name(&view.name);
                ctx.register_table(
                    TableReference::bare(name),
                    Arc::new(ViewTable::new(plan, Some(view.query.to_string()))),
                )
                .map_err(|e| SqlError::from(e).located(at))?;
            }
            Statement::Insert(insert) => {
                let (sink, plan) =
                    plan_insert(&ctx, &sinks, insert, &macros).map_err(|e| e.located(at))?;
                inserts.push((sink, plan, at));
            }
            Statement::Query(_) => {
                return Err(SqlError::Plan {
                    at,
                    message: "a SELECT on its own has nowhere to write".into(),
                    hint: Some(
                        "write INSERT INTO <table> SELECT …; a table WITH ('connector' = 'stdout') prints rows"
                            .into(),
                    ),
                })
            }
            other => {
                let text = other.to_string();
                let first: String = text.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
                return Err(SqlError::Plan {
                    at,
                    message: format!("`{first} …` is not a pipeline statement"),
                    hint: Some("a pipeline file holds CREATE TABLE, CREATE VIEW, CREATE FUNCTION and INSERT INTO statements".into()),
                });
            }
        }
    }
    for (table, used) in columns_read(inserts.iter().map(|(_, plan, _)| plan))? {
        if let Some(source) = sources.get_mut(&table) {
            if let Some(reading) = source.factory.reading_only(&used) {
                source.factory = reading;
            }
        }
    }
    for (table, (column, bounds)) in time_bounds(inserts.iter().map(|(_, plan, _)| plan))? {
        if let Some(source) = sources.get_mut(&table) {
            if let Some(pruning) = source.factory.reading_times_within(column, bounds) {
                source.factory = pruning;
            }
        }
    }
    let mut translator = Translator::new(graph, options.parallelism, &sources, &lookups);
    translator.processing_time = script.processing_time;
    let mut written = Vec::new();
    for (sink, plan, at) in &inserts {
        let (def, sink_table) = &sinks[sink];
        // After the scans' columns and time ranges are known: the hoisting projections
        // this adds under filters would hide a filter from `time_bounds`.
        let shared = case_lookups(share_filter_work(plan.clone())?)?;
        let stream = match sink_table.needs_withdrawals {
            true => translator.translate_as_changelog(&shared),
            false => translator.translate(&shared),
        }
        .map_err(|e| e.located(*at))?;
        attach_sink(&mut translator, &stream, plan, def, sink_table).map_err(|e| e.located(*at))?;
        if written.contains(sink) {
            return Err(SqlError::plan(format!(
                "`{sink}` is written by two INSERT INTO statements; give each its own sink table"
            ))
            .located(*at));
        }
        written.push(sink.clone());
    }
    if written.is_empty() {
        return Err(SqlError::Plan {
            at: Some(Location { line: 1, column: 1 }),
            message: "the file has no INSERT INTO, so the pipeline would compute nothing".into(),
            hint: Some("add INSERT INTO <sink table> SELECT … FROM <source table>".into()),
        });
    }
    Ok(SqlPipeline {
        graph: translator.graph,
        expected_rows,
        sinks: written,
        planning_time: started.elapsed(),
    })
}

/// The unoptimized DataFusion plan of a query.
fn logical_plan(
    ctx: &SessionContext,
    query: &Query,
    macros: &[crate::functions::SqlMacro],
) -> Result<LogicalPlan> {
    let mut query = query.clone();
    crate::unrun_syntax::refuse_unrun_syntax(&query)?;
    let state = ctx.state();
    let is_aggregate = |name: &str| state.aggregate_functions().contains_key(name);
    crate::grouping_sets::expand_grouping_sets(&mut query, &is_aggregate)?;
    crate::functions::expand_macros(&mut query, macros)?;
    crate::tvf::rewrite_window_tvfs(&mut query)?;
    crate::functions::rewrite_flink_calls(&mut query)?;
    let statement = DfStatement::Statement(Box::new(Statement::Query(Box::new(query))));
    Ok(futures::executor::block_on(
        state.statement_to_plan(statement),
    )?)
}

/// Plans one `INSERT INTO sink SELECT …` into the graph; returns the sink's name.
/// The sink table an INSERT writes and the optimized plan of its query.
fn plan_insert(
    ctx: &SessionContext,
    sinks: &HashMap<String, (TableDef, SinkTable)>,
    insert: &Insert,
    macros: &[crate::functions::SqlMacro],
) -> Result<(String, LogicalPlan)> {
    let TableObject::TableName(name) = &insert.table else {
        return Err(SqlError::plan(
            "INSERT INTO a table function is not supported",
        ));
    };
    let name = object_name(name);
    sinks.get(&name).ok_or_else(|| {
        SqlError::plan(format!(
            "INSERT INTO `{name}`: no such table; declare it first with CREATE TABLE {name} WITH ('connector' = …)"
        ))
    })?;
    if !insert.columns.is_empty() {
        return Err(SqlError::unsupported(
            "an INSERT column list",
            "drop it: the SELECT's columns fill the table's columns in order",
        ));
    }
    let Some(query) = &insert.source else {
        return Err(SqlError::plan("INSERT INTO needs a SELECT"));
    };
    let plan = logical_plan(ctx, query, macros)?;
    let plan = ctx.state().optimize(&plan)?;
    tracing::debug!("optimized plan:\n{}", plan.display_indent());
    Ok((name, plan))
}

/// Per table scanned by `plans`, the columns they read (ascending; every column when
/// a scan has no projection).
fn columns_read<'a>(
    plans: impl Iterator<Item = &'a LogicalPlan>,
) -> Result<HashMap<String, Vec<usize>>> {
    let mut read: HashMap<String, std::collections::BTreeSet<usize>> = HashMap::new();
    for plan in plans {
        plan.apply_with_subqueries(|node| {
            if let LogicalPlan::TableScan(scan) = node {
                let columns = read.entry(scan.table_name.table().to_string()).or_default();
                match &scan.projection {
                    Some(projection) => columns.extend(projection),
                    None => columns.extend(0..scan.source.schema().fields().len()),
                }
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
    }
    Ok(read
        .into_iter()
        .map(|(table, columns)| (table, columns.into_iter().collect()))
        .collect())
}
