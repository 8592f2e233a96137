-- Tumbling windows of 2 s from the epoch; a regular join, the window's end excluded.
WITH W AS (
    SELECT make_timestamp((epoch_ms("dateTime") // 2000 * 2000) * 1000) AS window_start,
           max(v) AS top
    FROM tick
    GROUP BY 1
)
SELECT T.id, T.v, T."dateTime", W.window_start, W.top
FROM tick T JOIN W ON T.v = W.top
WHERE T."dateTime" >= W.window_start AND T."dateTime" < W.window_start + INTERVAL 2 SECOND
