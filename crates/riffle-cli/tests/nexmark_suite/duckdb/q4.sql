-- Flink's AVG of a BIGINT is a BIGINT: the sum divided by the count, truncated.
SELECT category, sum(final) // count(final)
FROM (
    SELECT max(B.price) AS final, A.category
    FROM auction A JOIN bid B ON A.id = B.auction
    WHERE B."dateTime" BETWEEN A."dateTime" AND A.expires
    GROUP BY A.id, A.category
)
GROUP BY category
