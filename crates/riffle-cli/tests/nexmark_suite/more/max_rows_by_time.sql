-- Flink's q7 shape over `tick`: the rows whose value is the maximum of a 10 s window
-- and whose time lies in it, its end included (a row exactly at a window's end meets
-- that window and, if it holds that maximum too, its own).
CREATE TABLE nexmark_max_rows_by_time (
  id  BIGINT,
  v  BIGINT,
  `dateTime`  TIMESTAMP(3),
  window_end  TIMESTAMP(3),
  top  BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_max_rows_by_time
SELECT T.id, T.v, T.`dateTime`, W.`dateTime`, W.top
FROM tick T
JOIN (
  SELECT MAX(v) AS top, window_end AS `dateTime`
  FROM TABLE(
          TUMBLE(TABLE tick, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end
) W
ON T.v = W.top
WHERE T.`dateTime` BETWEEN W.`dateTime` - INTERVAL '10' SECOND AND W.`dateTime`;
