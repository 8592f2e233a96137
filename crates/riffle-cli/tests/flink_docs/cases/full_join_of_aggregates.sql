SELECT c.auction, c.bids, m.top_rating
FROM (SELECT auction, count(*) AS bids FROM bid WHERE price > 50 GROUP BY auction) c
FULL JOIN (SELECT auction, max(rating) AS top_rating FROM seller GROUP BY auction) m ON c.auction = m.auction
