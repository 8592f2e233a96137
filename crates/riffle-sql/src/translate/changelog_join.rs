//! Joins whose inputs are updating results (CDC tables, unwindowed aggregates, Top-N,
//! outer joins): both sides read as changelogs and joined by `ChangelogJoinFactory`,
//! whose output is a keyless changelog (docs/engine.md, "Joins of changelogs").

use super::join::column_index;
use super::plan_shape::{left_unique_on_keys, right_unique_on_keys};
use super::{Stream, Translator};
use crate::error::{Result, SqlError};
use datafusion::common::JoinType;
use datafusion::logical_expr::{Expr, Join};
use riffle_operators::ChangelogJoinFactory;
use std::sync::Arc;

impl Translator<'_> {
    /// `j` over `left` and `right`, at least one of them updating (both translated as
    /// changelogs where they can be).
    pub(super) fn changelog_join(
        &mut self,
        j: &Join,
        left: &Stream,
        right: &Stream,
    ) -> Result<Stream> {
        // A semi join whose right side holds one row per key at any time (an aggregate
        // grouped by the join keys: DataFusion's form of `IN` over it, or of an inner
        // join reading only left columns) is that inner join, its left columns kept.
        let semi_as_inner = match j.join_type {
            JoinType::LeftSemi => right_unique_on_keys(j),
            JoinType::RightSemi => left_unique_on_keys(j),
            _ => false,
        };
        let outer = match j.join_type {
            JoinType::Inner => (false, false),
            JoinType::LeftSemi | JoinType::RightSemi if semi_as_inner => (false, false),
            JoinType::Left => (true, false),
            JoinType::Right => (false, true),
            JoinType::Full => (true, true),
            _ => {
                return Err(SqlError::unsupported(
                    "EXISTS / IN / NOT EXISTS / NOT IN over an updating result",
                    "join the updating result ON its group columns (an inner or LEFT JOIN), or aggregate over a window before the semi join",
                ))
            }
        };
        for (side, s) in [("left", left), ("right", right)] {
            if s.updating.is_some() && !s.changelog {
                return Err(SqlError::unsupported(
                    format!("joining an updating result whose rows replace earlier rows without withdrawing them (the {side} side)"),
                    "join the input of the OVER window or Top-N instead",
                ));
            }
        }
        if j.filter.is_some() && outer != (false, false) {
            return Err(SqlError::unsupported(
                format!(
                    "{} JOIN of an updating result with a condition besides column equalities",
                    j.join_type.to_string().to_uppercase()
                ),
                "join ON equalities only and filter a side before joining",
            ));
        }
        let (ls, rs) = (j.left.schema(), j.right.schema());
        let mut keys: Vec<(usize, usize)> = Vec::new();
        let mut computed: Vec<(&Expr, &Expr)> = Vec::new();
        for (l, r) in &j.on {
            match (column_index(l, ls), column_index(r, rs)) {
                (Ok(li), Ok(ri)) => keys.push((li, ri)),
                _ => computed.push((l, r)),
            }
        }
        if keys.is_empty() && computed.is_empty() {
            return Err(SqlError::unsupported(
                "a join of an updating result without an equality between columns of the two sides",
                "join ON a.key = b.key; riffle has no cross or theta joins on streams",
            ));
        }
        let left = self.materialize_unless(left, None)?;
        let left = self.prune(&left)?;
        let right = self.materialize_unless(right, None)?;
        let right = self.prune(&right)?;
        let left_cols = left.physical_columns();
        let right = self.rename_clashes(&right, &left_cols)?;
        let right_cols = right.physical_columns();
        let ((left, lk), (right, rk)) = self.join_keys(j, (&left, &right), &keys, &computed)?;
        fn refs(v: &[String]) -> Vec<&str> {
            v.iter().map(String::as_str).collect()
        }
        let f = ChangelogJoinFactory::new(
            self.graph.schema(left.node),
            self.graph.schema(right.node),
            (&refs(&lk), &refs(&rk)),
            (&refs(&left_cols), &refs(&right_cols)),
            outer,
        )?;
        let p = Some(self.parallelism());
        let node = self.add("join", Arc::new(f), p, &[left.node, right.node])?;
        let mut columns = left.columns.clone();
        columns.extend(right.columns.iter().cloned());
        let mut stream = Stream::of_node(node, columns);
        stream.make_keyless_changelog();
        // An inner join's condition filters its changelog: a withdrawn pair fails it
        // exactly when the pair it withdraws did.
        let mut out = match &j.filter {
            Some(f) => self.filter(&stream, f, &ls.join(rs)?)?,
            None => stream,
        };
        let (nl, nr) = (ls.fields().len(), rs.fields().len());
        match j.join_type {
            JoinType::LeftSemi => out.keep_fields(0..nl),
            JoinType::RightSemi => out.keep_fields(nl..nl + nr),
            _ => {}
        }
        Ok(out)
    }
}
