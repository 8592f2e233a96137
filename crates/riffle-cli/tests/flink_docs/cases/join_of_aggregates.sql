SELECT c.auction, c.bids, s.seller
FROM (SELECT auction, count(*) AS bids FROM bid GROUP BY auction) c LEFT JOIN seller s ON c.auction = s.auction
