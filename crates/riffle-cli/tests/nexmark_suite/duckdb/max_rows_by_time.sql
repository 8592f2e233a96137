-- Tumbling windows of 10 s from the epoch; a regular join, inclusive at both ends.
WITH W AS (
    SELECT max(v) AS top,
           make_timestamp((epoch_ms("dateTime") // 10000 * 10000 + 10000) * 1000) AS "dateTime"
    FROM tick
    GROUP BY 2
)
SELECT T.id, T.v, T."dateTime", W."dateTime" AS window_end, W.top
FROM tick T JOIN W ON T.v = W.top
WHERE T."dateTime" BETWEEN W."dateTime" - INTERVAL 10 SECOND AND W."dateTime"
