SELECT auction, price, "dateTime",
       sum(price) OVER (PARTITION BY auction ORDER BY "dateTime" RANGE BETWEEN INTERVAL 5 SECOND PRECEDING AND CURRENT ROW)
FROM bid
