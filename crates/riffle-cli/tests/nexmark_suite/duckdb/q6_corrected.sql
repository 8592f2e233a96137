WITH joined AS (
    SELECT A.id, A.seller, B.price, B."dateTime"
    FROM auction AS A JOIN bid AS B ON A.id = B.auction
    WHERE B."dateTime" BETWEEN A."dateTime" AND A.expires
), top AS (
    SELECT * FROM (
        SELECT *, row_number() OVER (PARTITION BY id, seller ORDER BY price DESC) AS rownum
        FROM joined
    ) WHERE rownum <= 1
)
-- Flink's AVG of BIGINT: the sum divided by the count, truncated. Ties in time are
-- taken in auction order, as riffle orders rows of one time by their key.
SELECT id, seller,
       CAST(sum(price) OVER w // count(price) OVER w AS BIGINT)
FROM top
WINDOW w AS (PARTITION BY seller ORDER BY "dateTime", id ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)
