-- A running OVER aggregation: per channel, the bids so far and their lowest price, at
-- each bid in event-time order.
CREATE TABLE nexmark_over_unbounded (
  channel VARCHAR,
  price BIGINT,
  `dateTime` TIMESTAMP(3),
  bids_so_far BIGINT,
  lowest BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_over_unbounded
SELECT channel, price, `dateTime`,
  COUNT(*) OVER w,
  MIN(price) OVER w
FROM bid
WINDOW w AS (PARTITION BY channel ORDER BY `dateTime` RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);
