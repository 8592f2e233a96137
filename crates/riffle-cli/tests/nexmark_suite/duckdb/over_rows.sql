-- Bids of one bidder at the same time are taken in price order, as riffle takes rows
-- of one time in the order of their values (bidder, price, … as the input holds them).
SELECT bidder, price, "dateTime",
       CAST(sum(price) OVER w // count(price) OVER w AS BIGINT),
       max(price) OVER w,
       count(*) OVER w
FROM bid
WINDOW w AS (PARTITION BY bidder ORDER BY "dateTime", price ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)
