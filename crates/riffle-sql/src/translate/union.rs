//! `UNION ALL`: each input projected onto the union's column names (and the first
//! input's types), then one union operator taking every input's rows as they come.
//! Inputs are append-only streams, or changelogs (a changelog's rows must stay in their
//! order per key, so its inputs keep their subtasks: same parallelism, forward); beside
//! a changelog, an append-only input's rows are inserts (`+I`).

use super::{col_expr, unique_names, Stream, Translator};
use crate::error::{Result, SqlError};
use datafusion::logical_expr::{cast, Expr, Union};
use riffle_core::StreamSchema;
use riffle_operators::{ProjectFactory, UnionFactory};
use std::sync::Arc;

impl Translator<'_> {
    pub(super) fn union(&mut self, u: &Union) -> Result<Stream> {
        let names = unique_names(u.schema.fields().iter().map(|f| f.name().as_str()));
        let mut inputs = Vec::with_capacity(u.inputs.len());
        for input in &u.inputs {
            // An unwindowed GROUP BY or a Top-N comes as a changelog.
            let s = self.translate_as_changelog(input)?;
            // Window values become columns; rows of HOP/CUMULATE come once per window.
            inputs.push(self.materialize_unless(&s, None)?);
        }
        let changelog = inputs.iter().any(|s| s.changelog);
        for s in &inputs {
            if s.updating.is_some() && !s.changelog {
                return Err(SqlError::unsupported(
                    "UNION ALL of an updating result that is not a changelog (an OVER window's)",
                    "union the inputs of the OVER window",
                ));
            }
        }
        let parallelism = self.graph.nodes()[inputs[0].node.0].parallelism;
        if changelog
            && inputs
                .iter()
                .any(|s| self.graph.nodes()[s.node.0].parallelism != parallelism)
        {
            return Err(SqlError::unsupported(
                "UNION ALL of changelogs at different parallelisms",
                "run the pipeline at one parallelism",
            ));
        }
        // Every input's fields as the first input's columns: names and types.
        let first = self.graph.schema(inputs[0].node).clone();
        let types: Vec<_> = (0..names.len())
            .map(|i| {
                Ok(first
                    .schema
                    .field_with_name(&inputs[0].columns[i])?
                    .data_type()
                    .clone())
            })
            .collect::<Result<_>>()?;
        let mut nodes = Vec::with_capacity(inputs.len());
        for s in &inputs {
            let schema = self.graph.schema(s.node).clone();
            let mut exprs: Vec<Expr> = Vec::with_capacity(names.len());
            for (i, name) in names.iter().enumerate() {
                let column = &s.columns[i];
                let e = col_expr(column);
                let e = if schema.schema.field_with_name(column)?.data_type() == &types[i] {
                    e
                } else {
                    cast(e, types[i].clone())
                };
                exprs.push(e.alias(name));
            }
            let mut f = ProjectFactory::new(&schema, exprs)?;
            if changelog {
                // An append-only input's rows join the changelog as inserts.
                f = f.as_inserts()?;
            }
            nodes.push(self.add("project", Arc::new(f), None, &[s.node])?);
        }
        let schemas: Vec<&StreamSchema> = nodes.iter().map(|n| self.graph.schema(*n)).collect();
        let f = UnionFactory::new(&schemas)?;
        let node = self.add("union", Arc::new(f), Some(parallelism), &nodes)?;
        let mut stream = Stream::of_node(node, names);
        // The event time stays a field when every input has it in the same place.
        stream.event_time = inputs[0]
            .event_time
            .filter(|&i| inputs.iter().all(|s| s.event_time == Some(i)));
        if changelog {
            // Rows of different inputs share no key: withdrawn by their whole value.
            stream.make_keyless_changelog();
        }
        Ok(stream)
    }
}
