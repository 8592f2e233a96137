SELECT strftime("dateTime", '%Y-%m-%d') AS "day",
       count(*),
       count(*) FILTER (WHERE price < 10000),
       count(*) FILTER (WHERE price >= 10000 AND price < 1000000),
       count(*) FILTER (WHERE price >= 1000000),
       count(DISTINCT bidder),
       count(DISTINCT bidder) FILTER (WHERE price < 10000),
       count(DISTINCT bidder) FILTER (WHERE price >= 10000 AND price < 1000000),
       count(DISTINCT bidder) FILTER (WHERE price >= 1000000),
       count(DISTINCT auction),
       count(DISTINCT auction) FILTER (WHERE price < 10000),
       count(DISTINCT auction) FILTER (WHERE price >= 10000 AND price < 1000000),
       count(DISTINCT auction) FILTER (WHERE price >= 1000000)
FROM bid
GROUP BY 1
