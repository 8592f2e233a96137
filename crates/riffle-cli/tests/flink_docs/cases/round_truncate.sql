SELECT auction, price, ROUND(price, 2) AS r2, ROUND(price, 1) AS r1, ROUND(price) AS r0, TRUNCATE(price, 2) AS t2, TRUNCATE(price, -1) AS tm1
FROM bid
