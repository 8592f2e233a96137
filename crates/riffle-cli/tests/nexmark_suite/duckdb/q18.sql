-- The last bid of each bidder on each auction.
SELECT auction, bidder, price, channel, url, "dateTime", extra
FROM (
    SELECT *, row_number() OVER (PARTITION BY bidder, auction ORDER BY "dateTime" DESC) AS rank_number
    FROM bid
)
WHERE rank_number <= 1
