//! Lookup joins: `stream JOIN dim FOR SYSTEM_TIME AS OF s.proc_time AS d ON …` reads
//! `dim` by key as each row passes (`LookupJoinFactory`). The script layer turned the
//! clause into a plain join and marked `dim` as a lookup table; here a join whose right
//! side scans such a table becomes the lookup operator. Joined rows keep the stream
//! row's event time, so windows after the join work as before it.

use super::join::{column_index, refuse_updating};
use super::{fresh_name, Stream, Translator};
use crate::error::{Result, SqlError};
use datafusion::common::JoinType;
use datafusion::logical_expr::{Expr, Join, LogicalPlan, TableScan};
use riffle_operators::{LookupJoinFactory, LookupJoinKind};
use std::sync::Arc;

impl Translator<'_> {
    /// The join as a lookup join, or `None` when its right side is not a lookup table.
    pub(super) fn lookup_join(&mut self, j: &Join) -> Result<Option<Stream>> {
        let Some((scan, filters)) = lookup_scan(&j.right) else {
            return Ok(None);
        };
        let name = scan.table_name.table();
        let Some(table) = self.lookups.get(name).cloned() else {
            return Ok(None);
        };
        let kind = match j.join_type {
            JoinType::Inner => LookupJoinKind::Inner,
            JoinType::Left => LookupJoinKind::Left,
            other => return Err(SqlError::unsupported(
                format!("a {other} JOIN with the lookup table `{name}`"),
                "a lookup join is an inner JOIN or a LEFT JOIN, with the lookup table on the right",
            )),
        };
        let conditions: Vec<&Expr> = j.filter.iter().chain(&filters).collect();
        if kind == LookupJoinKind::Left && !conditions.is_empty() {
            return Err(SqlError::unsupported(
                format!(
                    "a condition other than key equalities (`{}`) in a LEFT JOIN with the lookup table `{name}`",
                    conditions[0]
                ),
                "keep only `s.x = d.key` equalities in ON, and filter the joined rows in the WHERE of a query around the join",
            ));
        }
        let left = self.translate(&j.left)?;
        refuse_updating(&left)?;
        let left = self.materialize_unless(&left, None)?;
        let (ls, rs) = (j.left.schema(), j.right.schema());
        // The table column of each field of the right side.
        let table_column = |field: usize| scan.projection.as_ref().map_or(field, |p| p[field]);
        let schema = table.schema();
        // Pairs whose stream side is a column, then those whose stream side is an
        // expression (computed into a column first), in the same order on both sides.
        let mut table_key = Vec::new();
        let mut table_key_computed = Vec::new();
        let mut stream_key: Vec<String> = Vec::new();
        let mut computed: Vec<&Expr> = Vec::new();
        for (l, r) in &j.on {
            let Ok(ri) = column_index(r, rs) else {
                return Err(SqlError::unsupported(
                    format!("the lookup key `{r}` (an expression over the lookup table `{name}`)"),
                    "compare a column of the lookup table with any expression over the stream: ON mod(s.auction, 10000) = d.key",
                ));
            };
            let column = schema.field(table_column(ri)).name().clone();
            match column_index(l, ls) {
                Ok(li) => {
                    stream_key.push(left.columns[li].clone());
                    table_key.push(column);
                }
                Err(_) => {
                    computed.push(l);
                    table_key_computed.push(column);
                }
            }
        }
        table_key.extend(table_key_computed);
        if table_key.is_empty() {
            return Err(SqlError::unsupported(
                format!("a lookup join with `{name}` without a key equality"),
                "join ON s.x = d.key: the table is read by key",
            ));
        }
        let (left, extra) = self.key_columns(&left, ls, computed.iter().copied())?;
        let mut keys = stream_key;
        keys.extend(extra);
        let mut taken = left.physical_columns();
        let names: Vec<String> = schema
            .fields()
            .iter()
            .map(|f| {
                let n = fresh_name(f.name(), &taken);
                taken.push(n.clone());
                n
            })
            .collect();
        let input = self.graph.schema(left.node).clone();
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let table_refs: Vec<&str> = table_key.iter().map(String::as_str).collect();
        let factory = LookupJoinFactory::new(&input, &key_refs, table, &table_refs, &names, kind)?;
        let node = self.add("lookup_join", Arc::new(factory), None, &[left.node])?;
        let mut columns = left.columns.clone();
        columns.extend((0..rs.fields().len()).map(|i| names[table_column(i)].clone()));
        let mut stream = Stream::of_node(node, columns);
        stream.event_time = left.event_time;
        match conditions.into_iter().cloned().reduce(Expr::and) {
            Some(condition) => self.filter(&stream, &condition, &j.schema).map(Some),
            None => Ok(Some(stream)),
        }
    }
}

/// The scan below `plan` through aliases and filters, with the filters' predicates.
fn lookup_scan(plan: &LogicalPlan) -> Option<(&TableScan, Vec<Expr>)> {
    let mut filters = Vec::new();
    let mut at = plan;
    loop {
        match at {
            LogicalPlan::SubqueryAlias(a) => at = &a.input,
            LogicalPlan::Filter(f) => {
                filters.push(f.predicate.clone());
                at = &f.input;
            }
            LogicalPlan::TableScan(scan) => {
                filters.extend(scan.filters.iter().cloned());
                return Some((scan, filters));
            }
            _ => return None,
        }
    }
}
