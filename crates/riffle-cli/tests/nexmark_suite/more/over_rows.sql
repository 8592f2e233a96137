-- OVER aggregations over the bid stream, in event-time order per bidder: the average,
-- the highest price and the count of each bid with the three before it.
CREATE TABLE nexmark_over_rows (
  bidder BIGINT,
  price BIGINT,
  `dateTime` TIMESTAMP(3),
  recent_avg BIGINT,
  recent_max BIGINT,
  n BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_over_rows
SELECT bidder, price, `dateTime`,
  AVG(price) OVER w,
  MAX(price) OVER w,
  COUNT(*) OVER w
FROM bid
WINDOW w AS (PARTITION BY bidder ORDER BY `dateTime` ROWS BETWEEN 3 PRECEDING AND CURRENT ROW);
