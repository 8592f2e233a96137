-- Tumbling windows of 2 s from the epoch; each row joined with its own window's minimum.
WITH W AS (
    SELECT make_timestamp((epoch_ms("dateTime") // 2000 * 2000) * 1000) AS window_start,
           min(v) AS low
    FROM tick
    GROUP BY 1
)
SELECT T.id, T.v, W.window_start, W.window_start + INTERVAL 2 SECOND AS window_end, W.low
FROM tick T JOIN W
  ON make_timestamp((epoch_ms(T."dateTime") // 2000 * 2000) * 1000) = W.window_start
 AND T.v = W.low
