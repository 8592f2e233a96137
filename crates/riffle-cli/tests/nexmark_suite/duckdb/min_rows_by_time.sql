-- Tumbling windows of 2 s from the epoch; a regular join, inclusive at both ends.
WITH W AS (
    SELECT make_timestamp((epoch_ms("dateTime") // 2000 * 2000) * 1000) AS window_start,
           min(v) AS low
    FROM tick
    GROUP BY 1
)
SELECT T.id, T.v, T."dateTime", W.window_start, W.low
FROM tick T JOIN W ON T.v = W.low
WHERE T."dateTime" BETWEEN W.window_start AND W.window_start + INTERVAL 2 SECOND
