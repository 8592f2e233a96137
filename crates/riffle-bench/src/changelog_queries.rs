//! riffle's own changelog benchmarks, written as the Flink suite's texts are (a sink
//! table and one `INSERT`, over the suite's `bid` table) so that `riffle bench
//! --flink-suite --queries …` plans and runs them the same way. They are not part of
//! the suite and `--queries all` does not run them.
//!
//! `changelog_upsert` is the baseline: an unwindowed aggregate whose result only
//! replaces rows. `changelog_having` filters it (the aggregate then withdraws each
//! changed row before its new one); `changelog_regroup` aggregates its result again,
//! taking withdrawn rows back. `changelog_inner_join` (each auction with its seller) is
//! the baseline of `changelog_left_join`, the same join keeping auctions whose seller
//! has not arrived, padded, and withdrawing them when it does. `changelog_dedup` (each
//! bidder's newest bid, an upsert per bidder) is the baseline of
//! `changelog_dedup_count`, which counts those bids per auction: the deduplication then
//! withdraws a bidder's previous bid and the count takes it back. `changelog_top_groups`
//! ranks an unwindowed aggregate (the 3 auctions with the most bids per `auction % 10`):
//! a Top-N over a changelog, keeping every auction of a partition.
//! `changelog_interval_join` (each auction with the bids of its first second) is the
//! baseline of `changelog_outer_interval_join`, the same as a LEFT JOIN: an auction
//! without such a bid leaves padded once its second has passed (append-only).
//! `changelog_join_of_changelogs` is `changelog_inner_join` over two unwindowed
//! aggregates (one row per auction and per person, so the rows are the same): a join of
//! changelogs; `changelog_join_inputs` runs the two aggregates alone (their share), and
//! `changelog_join_of_distincts` is its append-only twin: the same plan (each table
//! grouped by the same columns, then joined), but without the counts the groups never
//! change, so the groups are append-only and the append-only join runs them. The two
//! differ in the join alone.
//! `changelog_join_updates` joins two aggregates of the bids that both change with every
//! bid: each bid withdraws and re-adds one joined row.

/// The texts by name.
pub const QUERIES: [(&str, &str); 14] = [
    (
        "changelog_upsert",
        "CREATE TABLE discard_sink (auction BIGINT, num BIGINT, total BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO discard_sink
SELECT auction, count(*) AS num, sum(price) AS total FROM bid GROUP BY auction;",
    ),
    (
        "changelog_having",
        "CREATE TABLE discard_sink (auction BIGINT, num BIGINT, total BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO discard_sink
SELECT auction, count(*) AS num, sum(price) AS total FROM bid GROUP BY auction HAVING count(*) % 2 = 1;",
    ),
    (
        "changelog_regroup",
        "CREATE TABLE discard_sink (num BIGINT, auctions BIGINT, total BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO discard_sink
SELECT num, count(*) AS auctions, sum(total) AS total FROM (
  SELECT auction, count(*) AS num, sum(price) AS total FROM bid GROUP BY auction
) GROUP BY num;",
    ),
    (
        "changelog_inner_join",
        "CREATE TABLE discard_sink (id BIGINT, seller BIGINT, name VARCHAR) WITH ('connector' = 'blackhole');
INSERT INTO discard_sink
SELECT a.id, a.seller, p.name FROM auction a JOIN person p ON a.seller = p.id;",
    ),
    (
        "changelog_left_join",
        "CREATE TABLE discard_sink (id BIGINT, seller BIGINT, name VARCHAR) WITH ('connector' = 'blackhole');
INSERT INTO discard_sink
SELECT a.id, a.seller, p.name FROM auction a LEFT JOIN person p ON a.seller = p.id;",
    ),
    (
        "changelog_dedup",
        "CREATE TABLE discard_sink (bidder BIGINT, auction BIGINT, price BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO discard_sink
SELECT bidder, auction, price FROM (
  SELECT bidder, auction, price, ROW_NUMBER() OVER (PARTITION BY bidder ORDER BY dateTime DESC) AS rn FROM bid
) WHERE rn = 1;",
    ),
    (
        "changelog_dedup_count",
        "CREATE TABLE discard_sink (auction BIGINT, bidders BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO discard_sink
SELECT auction, count(*) AS bidders FROM (
  SELECT bidder, auction FROM (
    SELECT bidder, auction, ROW_NUMBER() OVER (PARTITION BY bidder ORDER BY dateTime DESC) AS rn FROM bid
  ) WHERE rn = 1
) GROUP BY auction;",
    ),
    (
        "changelog_top_groups",
        "CREATE TABLE discard_sink (category BIGINT, auction BIGINT, num BIGINT, rn BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO discard_sink
SELECT category, auction, num, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY category ORDER BY num DESC, auction) AS rn FROM (
    SELECT auction % 10 AS category, auction, num FROM (
      SELECT auction, count(*) AS num FROM bid GROUP BY auction))
) WHERE rn <= 3;",
    ),
    (
        "changelog_interval_join",
        "CREATE TABLE discard_sink (id BIGINT, bidder BIGINT, price BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO discard_sink
SELECT a.id, b.bidder, b.price FROM auction a JOIN bid b
  ON a.id = b.auction AND b.dateTime BETWEEN a.dateTime AND a.dateTime + INTERVAL '1' SECOND;",
    ),
    (
        "changelog_outer_interval_join",
        "CREATE TABLE discard_sink (id BIGINT, bidder BIGINT, price BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO discard_sink
SELECT a.id, b.bidder, b.price FROM auction a LEFT JOIN bid b
  ON a.id = b.auction AND b.dateTime BETWEEN a.dateTime AND a.dateTime + INTERVAL '1' SECOND;",
    ),
    (
        "changelog_join_inputs",
        "CREATE TABLE discard_sink (id BIGINT, n BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO discard_sink
SELECT id, n FROM (SELECT id, seller, count(*) AS n FROM auction GROUP BY id, seller)
UNION ALL
SELECT id, n FROM (SELECT id, name, count(*) AS n FROM person GROUP BY id, name);",
    ),
    (
        "changelog_join_of_changelogs",
        "CREATE TABLE discard_sink (id BIGINT, seller BIGINT, name VARCHAR, n BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO discard_sink
SELECT a.id, a.seller, p.name, a.n + p.n FROM (SELECT id, seller, count(*) AS n FROM auction GROUP BY id, seller) a
JOIN (SELECT id, name, count(*) AS n FROM person GROUP BY id, name) p ON a.seller = p.id;",
    ),
    (
        "changelog_join_of_distincts",
        "CREATE TABLE discard_sink (id BIGINT, seller BIGINT, name VARCHAR) WITH ('connector' = 'blackhole');
INSERT INTO discard_sink
SELECT a.id, a.seller, p.name FROM (SELECT id, seller FROM auction GROUP BY id, seller) a
JOIN (SELECT id, name FROM person GROUP BY id, name) p ON a.seller = p.id;",
    ),
    (
        "changelog_join_updates",
        "CREATE TABLE discard_sink (auction BIGINT, num BIGINT, top BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO discard_sink
SELECT c.auction, c.num, m.top FROM (SELECT auction, count(*) AS num FROM bid GROUP BY auction) c
JOIN (SELECT auction, max(price) AS top FROM bid GROUP BY auction) m ON c.auction = m.auction;",
    ),
];

/// The text of the changelog benchmark `name`.
pub fn text(name: &str) -> Option<&'static str> {
    QUERIES.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}
