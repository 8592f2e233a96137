-- CUMULATE windows: per auction, the bids, the highest price and the distinct bidders of
-- each 10-second window so far, growing every 2 seconds ([s, s+2s), [s, s+4s), …
-- [s, s+10s)), each emitted once when it closes (an append-only result).
CREATE TABLE nexmark_cumulate (
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  auction BIGINT,
  bids BIGINT,
  top_price BIGINT,
  bidders BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_cumulate
SELECT window_start, window_end, auction, count(*), max(price), count(DISTINCT bidder)
FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
GROUP BY window_start, window_end, auction;
