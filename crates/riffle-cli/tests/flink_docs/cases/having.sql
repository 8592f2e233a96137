SELECT auction, COUNT(*) AS bids
FROM bid
GROUP BY auction
HAVING COUNT(*) > 40
