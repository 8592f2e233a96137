WITH windowed AS (
    SELECT channel, t, (t // 4000) * 4000 AS s
    FROM (SELECT channel, epoch_ms("dateTime") AS t FROM bid)
), ends AS (
    SELECT *, unnest(range(s + 1000, s + 4001, 1000)) AS e FROM windowed
), counts AS (
    SELECT epoch_ms(s) AS window_start, epoch_ms(e) AS window_end, channel, count(*) AS bids
    FROM ends
    WHERE e > t
    GROUP BY s, e, channel
)
SELECT * FROM (
    SELECT *, row_number() OVER (PARTITION BY window_start, window_end ORDER BY bids DESC, channel) AS rownum
    FROM counts
) WHERE rownum <= 2
