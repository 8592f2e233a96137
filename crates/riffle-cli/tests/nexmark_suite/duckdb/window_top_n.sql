WITH counts AS (
    SELECT epoch_ms(("dateTime_ms" // 10000) * 10000) AS window_start,
           epoch_ms(("dateTime_ms" // 10000) * 10000 + 10000) AS window_end,
           auction, count(*) AS bids
    FROM (SELECT auction, epoch_ms("dateTime") AS "dateTime_ms" FROM bid)
    GROUP BY 1, 2, auction
)
SELECT * FROM (
    SELECT *, row_number() OVER (PARTITION BY window_start, window_end ORDER BY bids DESC, auction) AS rownum
    FROM counts
) WHERE rownum <= 3
