//! Shapes a query's result to its sink table and adds the sink: the checks of what the
//! table accepts (withdrawals, updates, its key, nested columns), the casts to its
//! declared columns, and a keyless changelog put in order per the table's key.

use crate::connectors::SinkTable;
use crate::ddl::TableDef;
use crate::error::{Result, SqlError};
use crate::translate::{field_expr, Stream, Translator};
use datafusion::logical_expr::{cast, Expr, LogicalPlan};
use riffle_core::{ROW_KIND_FIELD, TIMESTAMP_FIELD};
use riffle_operators::{ProjectFactory, UpsertMaterializeFactory};
use std::collections::HashSet;
use std::sync::Arc;

/// `stream`, a changelog without a key of its own, put back in order per `key` (the
/// table's, of the fields `names`): the changes of one table key may come from
/// different subtasks (a join of changelogs moves a row whose join key changed; a
/// union's inputs interleave; a projection dropped the key a Top-N kept in order).
/// Keyed by the table's key, the materializer emits each key's changes from one
/// subtask, in order (docs/engine.md, "Joins of changelogs").
fn in_order_per_key(
    t: &mut Translator<'_>,
    stream: &Stream,
    names: &[String],
    key: &[String],
) -> Result<Stream> {
    let stream = t.materialize_unless(stream, None)?;
    let columns = key
        .iter()
        .map(|k| {
            let i = names.iter().position(|n| n == k).ok_or_else(|| {
                SqlError::plan(format!(
                    "PRIMARY KEY column `{k}` is not a column of the table"
                ))
            })?;
            Ok(stream.columns[i].as_str())
        })
        .collect::<Result<Vec<_>>>()?;
    let f = UpsertMaterializeFactory::new(t.graph.schema(stream.node), &columns)?;
    let node = t.add("in_order_by_key", Arc::new(f), None, &[stream.node])?;
    Ok(Stream {
        node,
        ..stream.clone()
    })
}

/// Shapes the result to the sink's columns and adds the sink.
pub(crate) fn attach_sink(
    t: &mut Translator<'_>,
    stream: &Stream,
    plan: &LogicalPlan,
    def: &TableDef,
    sink: &SinkTable,
) -> Result<()> {
    let fields = plan.schema().fields();
    let (names, types): (Vec<String>, Vec<Option<_>>) = if def.columns.is_empty() {
        (
            fields.iter().map(|f| f.name().clone()).collect(),
            vec![None; fields.len()],
        )
    } else {
        if def.columns.len() != fields.len() {
            return Err(SqlError::plan(format!(
                "INSERT INTO `{}`: the table has {} columns, the SELECT gives {}",
                def.name,
                def.columns.len(),
                fields.len()
            )));
        }
        (
            def.columns.iter().map(|f| f.name().clone()).collect(),
            def.columns
                .iter()
                .map(|f| Some(f.data_type().clone()))
                .collect(),
        )
    };
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(SqlError::Plan {
                at: None,
                message: format!("two result columns are named `{n}`"),
                hint: Some(format!("alias one of them: … AS {n}_2")),
            });
        }
        if n == TIMESTAMP_FIELD || n == ROW_KIND_FIELD {
            return Err(SqlError::plan(format!(
                "`{n}` is reserved; alias the column"
            )));
        }
    }
    if stream.changelog {
        if let Err(why) = &sink.retractions {
            return Err(SqlError::Plan {
                at: None,
                message: format!("the result withdraws rows (it is a changelog: a filtered or regrouped GROUP BY without a window, an outer join, or a source of change events), but {why}"),
                hint: Some("write to a table that applies deletes (stdout, blackhole, a postgres or kafka table with PRIMARY KEY, or a filesystem table with 'format' = 'debezium-json'), or filter before aggregating".into()),
            });
        }
    }
    if sink.needs_withdrawals && stream.updating.is_some() && !stream.changelog {
        return Err(SqlError::Plan {
            at: None,
            message: format!("`{}` writes change events, each replaced row withdrawn before its new row, but the result only replaces rows (an OVER window over an unwindowed GROUP BY)", def.name),
            hint: Some("write to a table that takes updates by key (a postgres or kafka table with PRIMARY KEY), or compute the OVER window over the GROUP BY's input".into()),
        });
    }
    if let Some(keys) = &stream.updating {
        if let Err(why) = &sink.updates {
            return Err(SqlError::Plan {
                at: None,
                message: format!("the result is updating (a GROUP BY without a window changes its rows as input arrives), but {why}"),
                hint: Some("write to a table that takes updates (stdout, blackhole, or a filesystem, postgres or kafka table with PRIMARY KEY), or group by a tumble/hop/session window for a final result per window".into()),
            });
        }
        let key_names: HashSet<&String> = keys.iter().map(|&k| &names[k]).collect();
        let declared: HashSet<&String> = def.primary_key.iter().collect();
        // A changelog without a key (an outer join's) is applied by the key the table
        // declares, which the user vouches is unique in the result (Flink's NOT ENFORCED).
        let keyless = keys.is_empty() && stream.changelog;
        if !keyless && !declared.is_empty() && declared != key_names {
            return Err(SqlError::plan(format!(
                "`{}` declares PRIMARY KEY ({}), but the result is updated per ({})",
                def.name,
                def.primary_key.join(", "),
                keys.iter()
                    .map(|&k| names[k].as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    let ordered;
    let stream = match stream.updating.as_deref() {
        Some([]) if stream.changelog && !def.primary_key.is_empty() => {
            ordered = in_order_per_key(t, stream, &names, &def.primary_key)?;
            &ordered
        }
        _ => stream,
    };
    // Rows of a HOP or CUMULATE table function reach a table once per window.
    let stream = &t.expand_windows(stream, None)?;
    let schema = t.graph.schema(stream.node).schema.clone();
    if !sink.nested {
        let nested = (0..names.len()).find(|&i| {
            stream.windows[i].is_some_and(|w| w.part == crate::translate::WindowPart::Whole)
                || schema
                    .field_with_name(&stream.columns[i])
                    .is_ok_and(|f| f.data_type().is_nested())
        });
        if let Some(i) = nested {
            return Err(SqlError::Plan {
                at: None,
                message: format!("`{}` cannot hold the nested column `{}`", def.name, names[i]),
                hint: Some(format!(
                    "write its parts as columns, e.g. {0}['start'] AS window_start, {0}['end'] AS window_end",
                    names[i]
                )),
            });
        }
    }
    let mut exprs: Vec<Expr> = Vec::new();
    let hidden = 1 + usize::from(stream.changelog); // `_timestamp`, `_row_kind`
    let mut identity = schema.fields().len() == names.len() + hidden;
    for (i, name) in names.iter().enumerate() {
        let column = &stream.columns[i];
        let physical = if stream.is_virtual(i) {
            identity = false;
            match stream.windows[i].map(|w| w.part) {
                Some(crate::translate::WindowPart::Whole) | None => crate::windows::window_type(),
                Some(_) => riffle_core::timestamp_type(),
            }
        } else {
            schema.field_with_name(column)?.data_type().clone()
        };
        let e = match &types[i] {
            Some(t) if *t != physical => {
                identity = false;
                cast(field_expr(stream, i)?, t.clone())
            }
            _ => field_expr(stream, i)?,
        };
        // (Short-circuit: a stream may name more fields than its batches hold columns.)
        identity = identity && schema.field(i).name() == name && column == name;
        exprs.push(e.alias(name));
    }
    let mut node = stream.node;
    if !identity {
        let f = ProjectFactory::new(t.graph.schema(node), exprs)?;
        node = t.add("project", Arc::new(f), None, &[node])?;
    }
    let p = t.graph.nodes()[node.0].parallelism;
    t.graph.sink(&def.name, sink.factory.clone(), p, node)?;
    Ok(())
}
