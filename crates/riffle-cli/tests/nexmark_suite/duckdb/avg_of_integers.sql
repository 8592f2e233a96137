SELECT auction, CAST(sum(price) // count(price) AS DOUBLE), avg(CAST(price AS DOUBLE)), count(*)
FROM bid
GROUP BY auction
