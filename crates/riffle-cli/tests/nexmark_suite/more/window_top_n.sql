-- Window Top-N (Flink's form): the three auctions with the most bids in each 10-second
-- window, emitted once per window when it closes (an append-only result).
CREATE TABLE nexmark_window_top_n (
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  auction BIGINT,
  bids BIGINT,
  rownum BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_window_top_n
SELECT window_start, window_end, auction, bids, rownum FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY bids DESC, auction) AS rownum
  FROM (
    SELECT window_start, window_end, auction, count(*) AS bids
    FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
    GROUP BY window_start, window_end, auction
  )
) WHERE rownum <= 3;
