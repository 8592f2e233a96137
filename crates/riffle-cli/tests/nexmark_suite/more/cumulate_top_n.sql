-- Window Top-N over CUMULATE windows: the two busiest channels of each cumulating
-- window (steps of 1 second up to 4 seconds), one result per window when it closes.
CREATE TABLE nexmark_cumulate_top_n (
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  channel VARCHAR,
  bids BIGINT,
  rownum BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_cumulate_top_n
SELECT window_start, window_end, channel, bids, rownum FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY bids DESC, channel) AS rownum
  FROM (
    SELECT window_start, window_end, channel, count(*) AS bids
    FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '1' SECOND, INTERVAL '4' SECOND))
    GROUP BY window_start, window_end, channel
  )
) WHERE rownum <= 2;
