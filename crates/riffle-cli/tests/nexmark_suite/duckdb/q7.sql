-- Tumbling windows of 10 s from the epoch; the join is a regular join, inclusive at
-- both ends. The SELECT list puts price before bidder, as the query text does.
WITH B1 AS (
    SELECT max(price) AS maxprice,
           make_timestamp((epoch_ms("dateTime") // 10000 * 10000 + 10000) * 1000) AS "dateTime"
    FROM bid
    GROUP BY 2
)
SELECT B.auction, B.price, B.bidder, B."dateTime", B.extra
FROM bid B JOIN B1 ON B.price = B1.maxprice
WHERE B."dateTime" BETWEEN B1."dateTime" - INTERVAL 10 SECOND AND B1."dateTime"
