-- The rows holding a 2 s window's minimum as Flink users write it over window TVFs: both
-- sides windowed, joined on the window and the value. The subquery's columns come in
-- another order than its GROUP BY's.
CREATE TABLE nexmark_min_rows_tvf (
  id  BIGINT,
  v  BIGINT,
  window_start  TIMESTAMP(3),
  window_end  TIMESTAMP(3),
  low  BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_min_rows_tvf
SELECT T.id, T.v, W.window_start, W.window_end, W.low
FROM TABLE(TUMBLE(TABLE tick, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND)) T
JOIN (
  SELECT MIN(v) AS low, window_start, window_end
  FROM TABLE(
          TUMBLE(TABLE tick, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND))
  GROUP BY window_start, window_end
) W
ON T.window_start = W.window_start AND T.window_end = W.window_end AND T.v = W.low;
