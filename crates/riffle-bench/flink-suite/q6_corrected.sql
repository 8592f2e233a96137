-- Nexmark q6 as it runs: the suite's text reads `rownum` in the WHERE of the SELECT
-- that defines it, and `A.id` outside the subquery that names `A`, so Flink refuses it
-- too. Corrected: the top bid of each auction during its lifetime (ROW_NUMBER top-1),
-- then per seller the average of the last 11 winning prices in time (an OVER window
-- over that updating result, emitted again whenever a winning bid changes; keyed by
-- auction and seller).
CREATE TABLE nexmark_q6_corrected (
  id BIGINT,
  seller BIGINT,
  avg_price BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_q6_corrected
SELECT
    Q.id,
    Q.seller,
    AVG(Q.price) OVER
        (PARTITION BY Q.seller ORDER BY Q.`dateTime` ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)
FROM (
    SELECT * FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY id, seller ORDER BY price DESC) AS rownum
        FROM (SELECT A.id, A.seller, B.price, B.`dateTime`
            FROM auction AS A,
                bid AS B
            WHERE A.id = B.auction
                and B.`dateTime` between A.`dateTime` and A.expires)
    )
    WHERE rownum <= 1
) AS Q;
