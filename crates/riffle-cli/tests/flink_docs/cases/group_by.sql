SELECT channel, COUNT(*) AS bids, MAX(price) AS top, SUM(bidder) AS bidders
FROM bid
GROUP BY channel
