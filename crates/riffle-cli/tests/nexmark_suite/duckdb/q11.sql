-- Sessions of 10 s per bidder: a bid at most 10 s after the bidder's previous one
-- continues its session (Flink merges windows that touch); a session ends 10 s after
-- its last bid.
WITH marked AS (
    SELECT bidder, "dateTime",
           CASE WHEN "dateTime" - lag("dateTime") OVER (PARTITION BY bidder ORDER BY "dateTime")
                     <= INTERVAL 10 SECOND THEN 0 ELSE 1 END AS fresh
    FROM bid
),
numbered AS (
    SELECT bidder, "dateTime",
           sum(fresh) OVER (PARTITION BY bidder ORDER BY "dateTime" ROWS UNBOUNDED PRECEDING) AS session
    FROM marked
)
SELECT bidder, count(*), min("dateTime"), max("dateTime") + INTERVAL 10 SECOND
FROM numbered
GROUP BY bidder, session
