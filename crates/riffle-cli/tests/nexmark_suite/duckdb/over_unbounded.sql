SELECT channel, price, "dateTime",
       count(*) OVER w,
       min(price) OVER w
FROM bid
WINDOW w AS (PARTITION BY channel ORDER BY "dateTime" RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
