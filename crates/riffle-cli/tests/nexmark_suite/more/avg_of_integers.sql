-- AVG of a BIGINT is a BIGINT in Flink (the sum divided by the count, truncated), even
-- into a DOUBLE column; AVG of a DOUBLE is the fractional average.
CREATE TABLE nexmark_avg_of_integers (
  auction BIGINT,
  avg_price DOUBLE,
  avg_double DOUBLE,
  n BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_avg_of_integers
SELECT auction, AVG(price) AS avg_price, AVG(dollars) AS avg_double, count(*) AS n
FROM (SELECT auction, price, CAST(price AS DOUBLE) AS dollars FROM bid)
GROUP BY auction;
