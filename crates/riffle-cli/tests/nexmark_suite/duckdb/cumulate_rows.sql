-- A bid at t is in the windows [s, e) with s its 2-second window's start and e each
-- whole second past t up to s + 2 s.
WITH b AS (
    SELECT auction, price, epoch_ms("dateTime") AS t, epoch_ms("dateTime") // 2000 * 2000 AS s
    FROM bid WHERE auction % 10 = 7
), ends AS (
    SELECT *, unnest(range(t // 1000 * 1000 + 1000, s + 2001, 1000)) AS e FROM b
)
SELECT auction, price, epoch_ms(s) AS window_start, epoch_ms(e) AS window_end,
       epoch_ms(e - 1) AS window_time
FROM ends
WHERE price > 100000 OR e < s + 2000
