-- The rows holding a 2 s window's minimum, matched by time from its start to its end
-- inclusive, the bounds written the other way round.
CREATE TABLE nexmark_min_rows_by_time (
  id  BIGINT,
  v  BIGINT,
  `dateTime`  TIMESTAMP(3),
  window_start  TIMESTAMP(3),
  low  BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_min_rows_by_time
SELECT T.id, T.v, T.`dateTime`, W.window_start, W.low
FROM tick T
JOIN (
  SELECT window_start, window_end, MIN(v) AS low
  FROM TABLE(
          TUMBLE(TABLE tick, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND))
  GROUP BY window_start, window_end
) W
ON W.low = T.v
WHERE W.window_start <= T.`dateTime` AND W.window_end >= T.`dateTime`;
