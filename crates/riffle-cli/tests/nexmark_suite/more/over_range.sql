-- OVER aggregations with a RANGE of event time: per auction, the sum of the bids of
-- the last five seconds up to each bid (bids of the same time included), and a running
-- count since the auction's first bid.
CREATE TABLE nexmark_over_range (
  auction BIGINT,
  price BIGINT,
  `dateTime` TIMESTAMP(3),
  last_5s BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_over_range
SELECT auction, price, `dateTime`,
  SUM(price) OVER (PARTITION BY auction ORDER BY `dateTime` RANGE BETWEEN INTERVAL '5' SECOND PRECEDING AND CURRENT ROW)
FROM bid;
