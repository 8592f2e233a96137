SELECT channel, auction, COUNT(*) AS bids
FROM bid
GROUP BY CUBE (channel, auction)
