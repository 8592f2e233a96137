-- As max_rows_by_time with the window's end left out: a row exactly at a window's end
-- meets only the window it starts.
CREATE TABLE nexmark_max_rows_in_window (
  id  BIGINT,
  v  BIGINT,
  `dateTime`  TIMESTAMP(3),
  window_start  TIMESTAMP(3),
  top  BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_max_rows_in_window
SELECT T.id, T.v, T.`dateTime`, W.window_start, W.top
FROM tick T
JOIN (
  SELECT MAX(v) AS top, window_start, window_end
  FROM TABLE(
          TUMBLE(TABLE tick, DESCRIPTOR(`dateTime`), INTERVAL '2' SECOND))
  GROUP BY window_start, window_end
) W
ON T.v = W.top
WHERE T.`dateTime` >= W.window_start AND T.`dateTime` < W.window_end;
