-- The ten highest bids of each auction, with their rank.
SELECT * FROM (
    SELECT *, row_number() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number
    FROM bid
)
WHERE rank_number <= 10
