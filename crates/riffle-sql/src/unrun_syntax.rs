//! Query syntax riffle does not run on streams, refused by name before DataFusion plans
//! it (DataFusion would plan `INTERSECT` as a semi join and name that instead, and
//! reject `MATCH_RECOGNIZE` with its syntax tree).

use crate::error::{Result, SqlError};
use datafusion::sql::sqlparser::ast::{Query, SetExpr, SetOperator, TableFactor, Visit, Visitor};
use std::ops::ControlFlow;

struct Refusal;

impl Visitor for Refusal {
    type Break = SqlError;

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<SqlError> {
        if let Some(op) = set_operation(&query.body) {
            return ControlFlow::Break(SqlError::unsupported(
                format!("{op} of two queries"),
                "within a window, write it as EXISTS (INTERSECT) or NOT EXISTS (EXCEPT) on the key and window_start, window_end; riffle has no unbounded set difference",
            ));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<SqlError> {
        if let TableFactor::MatchRecognize { .. } = factor {
            return ControlFlow::Break(SqlError::unsupported(
                "MATCH_RECOGNIZE (pattern recognition)",
                "riffle has no pattern operator; a pattern of two rows can often be written as a self-join within an interval",
            ));
        }
        ControlFlow::Continue(())
    }
}

/// The `INTERSECT` or `EXCEPT` at the top of `body`, if there is one.
fn set_operation(body: &SetExpr) -> Option<&'static str> {
    match body {
        SetExpr::SetOperation {
            op, left, right, ..
        } => match op {
            SetOperator::Intersect => Some("INTERSECT"),
            SetOperator::Except | SetOperator::Minus => Some("EXCEPT"),
            _ => set_operation(left).or_else(|| set_operation(right)),
        },
        _ => None,
    }
}

/// Refuses `INTERSECT`, `EXCEPT` and `MATCH_RECOGNIZE` in `query`, naming them.
///
/// # Errors
/// The first of them, with what to write instead.
pub(crate) fn refuse_unrun_syntax(query: &Query) -> Result<()> {
    match query.visit(&mut Refusal) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::ast::Statement;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn refused(sql: &str) -> Option<String> {
        let Statement::Query(q) = Parser::parse_sql(&GenericDialect {}, sql)
            .unwrap()
            .remove(0)
        else {
            panic!("not a query");
        };
        refuse_unrun_syntax(&q).err().map(|e| e.to_string())
    }

    #[test]
    fn set_differences_and_patterns_are_refused_by_name() {
        assert!(refused("SELECT a FROM t INTERSECT SELECT a FROM u")
            .unwrap()
            .contains("INTERSECT"));
        assert!(
            refused("SELECT a FROM t UNION ALL (SELECT a FROM u EXCEPT SELECT a FROM v)")
                .unwrap()
                .contains("EXCEPT")
        );
        let pattern = "SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.v AS v ONE ROW PER MATCH PATTERN (A B) DEFINE B AS B.v > A.v)";
        assert!(refused(pattern).unwrap().contains("MATCH_RECOGNIZE"));
    }

    #[test]
    fn unions_and_plain_queries_pass() {
        assert_eq!(refused("SELECT a FROM t UNION ALL SELECT a FROM u"), None);
        assert_eq!(refused("SELECT a FROM t UNION SELECT a FROM u"), None);
        assert_eq!(
            refused("SELECT a FROM t WHERE a IN (SELECT a FROM u)"),
            None
        );
    }
}
