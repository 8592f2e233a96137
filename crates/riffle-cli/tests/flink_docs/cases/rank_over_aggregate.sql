SELECT channel, bidder, bids, r
FROM (
  SELECT *, RANK() OVER (PARTITION BY channel ORDER BY bids DESC) AS r
  FROM (SELECT channel, bidder, COUNT(*) AS bids FROM bid GROUP BY channel, bidder))
WHERE r <= 2
