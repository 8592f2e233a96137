//! The grammar's query texts that read the same in riffle's dialect and DuckDB's
//! (`grammar.rs` writes the rest twice): the batch answer of each is the final table of
//! riffle's changelog or its rows.

use super::grammar::Query;

impl Query {
    /// A `ChangelogJoin` query's text, the same in both dialects: the batch answer is
    /// the changelog's final table.
    pub(super) fn changelog_join_sql(&self) -> String {
        let Query::ChangelogJoin { g, kind, both } = self else {
            unreachable!("changelog_join_sql of {self:?}")
        };
        let totals = format!(
            "SELECT k % {g} AS gk, count(*) AS c, sum(amount) AS total FROM pay GROUP BY k % {g}"
        );
        if *both {
            format!(
                "SELECT a.k AS ek, a.n AS n, b.gk AS pk, b.total AS total\n\
                 FROM (SELECT k, count(*) AS n FROM ev GROUP BY k) a\n\
                 {kind} JOIN ({totals}) b ON a.k = b.gk"
            )
        } else {
            format!(
                "SELECT e.id AS eid, b.c AS n, b.total AS total FROM ev e\n\
                 {kind} JOIN ({totals}) b ON e.k = b.gk"
            )
        }
    }

    /// An `InnerJoin` query's text, the same in both dialects.
    pub(super) fn inner_join_sql(&self) -> String {
        let Query::InnerJoin { m } = self else {
            unreachable!("inner_join_sql of {self:?}")
        };
        format!(
            "SELECT e.id AS eid, p.id AS pid, e.v - p.amount AS d FROM ev e JOIN pay p\n  ON e.k = p.k AND e.v % {m} = p.amount % {m}"
        )
    }

    /// An `OuterIntervalJoin` query's text, the same in both dialects (`ts` is epoch
    /// milliseconds in both).
    pub(super) fn outer_interval_sql(&self) -> String {
        let Query::OuterIntervalJoin {
            lo_ms, hi_ms, kind, ..
        } = self
        else {
            unreachable!("outer_interval_sql of {self:?}")
        };
        format!(
            "SELECT e.id AS eid, p.id AS pid FROM ev e {kind} JOIN pay p\n  ON e.k = p.k AND p.ts BETWEEN e.ts - {lo_ms} AND e.ts + {hi_ms}"
        )
    }

    /// A `Having` query's text, the same in both dialects.
    pub(super) fn having_sql(&self) -> String {
        let Query::Having {
            g,
            m,
            r,
            on_count,
            outer,
        } = self
        else {
            unreachable!("having_sql of {self:?}")
        };
        // Counts of `id % g` groups are all about equal: offset them by the group so
        // that some pass.
        let (aggregate, column) = if *on_count {
            (format!("(count(*) + id % {g})"), "(n + k)")
        } else {
            ("sum(v)".to_string(), "total")
        };
        // Many more groups than keys, each updated often.
        let grouped = format!(
            "SELECT id % {g} AS k, count(*) AS n, sum(v) AS total FROM ev GROUP BY id % {g}"
        );
        if *outer {
            format!("SELECT k, n, total FROM ({grouped}) g WHERE {column} % {m} = {r}")
        } else {
            format!("{grouped} HAVING {aggregate} % {m} = {r}")
        }
    }

    /// A `Union` query's text, the same in both dialects.
    pub(super) fn union_sql(&self) -> String {
        let Query::Union { changelog, m } = self else {
            unreachable!("union_sql of {self:?}")
        };
        if *changelog {
            // Rows come and go as counts grow. Which residue a group needs depends on its
            // key, so some group passes at the end whatever the counts (a fixed residue
            // left DuckDB's answer empty when every group ended with the same count).
            format!(
                "SELECT id % 30 AS a, count(*) AS b FROM ev GROUP BY id % 30 HAVING count(*) % {m} = id % 30 % {m}\n\
                 UNION ALL\n\
                 SELECT id % 20 AS a, sum(amount) AS b FROM pay GROUP BY id % 20 HAVING count(*) % {m} = (id % 20 + 1) % {m}"
            )
        } else {
            format!(
                "SELECT id AS a, v AS b FROM ev WHERE v % {m} = 0\nUNION ALL\nSELECT id AS a, amount AS b FROM pay"
            )
        }
    }

    /// A `RankedRegroup` or `TopGroups` query's text, the same in both dialects. Every
    /// order is total (ties broken by a unique column), so the final ranks are one answer
    /// whatever order rows arrive in.
    pub(super) fn ranked_sql(&self) -> String {
        match self {
            Query::RankedRegroup { n, newest, m } => {
                let order = if *newest {
                    "ts DESC, id DESC"
                } else {
                    "v DESC, id"
                };
                format!(
                    "SELECT v % {m} AS r, count(*) AS n, sum(id) AS total, max(v) AS hi FROM (\n  \
                     SELECT k, id, v FROM (SELECT k, id, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY {order}) AS rn FROM ev) ranked\n  \
                     WHERE rn <= {n}) kept\nGROUP BY v % {m}",
                    n = if *newest { 1 } else { *n }
                )
            }
            Query::TopGroups { g, n } => format!(
                "SELECT p, rn, k, n FROM (\n  \
                 SELECT p, k, n, ROW_NUMBER() OVER (PARTITION BY p ORDER BY n DESC, k) AS rn FROM (\n    \
                 SELECT k % 3 AS p, k, n FROM (SELECT id % {g} AS k, count(*) + id % {g} AS n FROM ev GROUP BY id % {g}) grouped) regrouped) ranked\n\
                 WHERE rn <= {n}"
            ),
            other => unreachable!("ranked_sql of {other:?}"),
        }
    }

    /// A `Regroup` query's text, the same in both dialects.
    pub(super) fn regroup_sql(&self) -> String {
        let Query::Regroup { g, m, having } = self else {
            unreachable!("regroup_sql of {self:?}")
        };
        let having = having
            .map(|(hm, hr)| format!(" HAVING (count(*) + id % {g}) % {hm} = {hr}"))
            .unwrap_or_default();
        // With m = 5 the groups are regrouped by their counts themselves: the outer
        // count(*) then has the name DataFusion gave the inner one.
        let r = if *m == 5 {
            "n".to_string()
        } else {
            format!("total % {m}")
        };
        format!(
            "SELECT {r} AS r, count(*) AS groups, sum(n) AS rows_in, max(n) AS top, min(total) AS bottom, count(DISTINCT n) AS sizes FROM (\n  SELECT id % {g} AS k, count(*) AS n, sum(v) AS total FROM ev GROUP BY id % {g}{having}) inner_groups\nGROUP BY {r}"
        )
    }
}

pub(super) fn where_mod(filter_mod: Option<i64>) -> String {
    filter_mod
        .map(|m| format!(" WHERE v % {m} <> 0"))
        .unwrap_or_default()
}
