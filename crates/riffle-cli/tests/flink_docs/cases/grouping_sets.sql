SELECT channel, auction, COUNT(*) AS bids
FROM bid
GROUP BY GROUPING SETS ((channel), (auction))
