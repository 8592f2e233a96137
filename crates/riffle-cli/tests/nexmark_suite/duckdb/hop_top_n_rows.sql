-- Each bid is in the windows [e - 2 s, e) with e the next two whole seconds past it;
-- ties in a window's top two would make the answer ambiguous (the test would show it).
WITH windowed AS (
    SELECT auction, price,
           unnest(range(epoch_ms("dateTime") // 1000 * 1000 + 1000,
                        epoch_ms("dateTime") // 1000 * 1000 + 2001, 1000)) AS e
    FROM bid
)
SELECT * FROM (
    SELECT epoch_ms(e - 2000) AS window_start, epoch_ms(e) AS window_end, auction, price,
           row_number() OVER (PARTITION BY e ORDER BY price DESC) AS rownum
    FROM windowed
) WHERE rownum <= 2
