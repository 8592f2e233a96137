-- Each bid is in the cumulating windows [s, e) with s its 10-second window's start and
-- e = s + 2 s, s + 4 s, … s + 10 s past the bid.
WITH windowed AS (
    SELECT auction, bidder, price, t, (t // 10000) * 10000 AS s
    FROM (SELECT auction, bidder, price, epoch_ms("dateTime") AS t FROM bid)
), ends AS (
    SELECT *, unnest(range(s + 2000, s + 10001, 2000)) AS e FROM windowed
)
SELECT epoch_ms(s) AS window_start, epoch_ms(e) AS window_end, auction,
       count(*) AS bids, max(price) AS top_price, count(DISTINCT bidder) AS bidders
FROM ends
WHERE e > t
GROUP BY s, e, auction
