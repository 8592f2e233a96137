-- Flink's AVG of a BIGINT is a BIGINT: the sum divided by the count, truncated.
SELECT auction,
       strftime("dateTime", '%Y-%m-%d') AS "day",
       count(*),
       count(*) FILTER (WHERE price < 10000),
       count(*) FILTER (WHERE price >= 10000 AND price < 1000000),
       count(*) FILTER (WHERE price >= 1000000),
       min(price),
       max(price),
       sum(price) // count(price),
       sum(price)
FROM bid
GROUP BY 1, 2
