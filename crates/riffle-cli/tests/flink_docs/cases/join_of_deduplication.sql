SELECT d.bidder, d.auction, d.price, s.seller
FROM (SELECT * FROM (SELECT bidder, auction, price, ROW_NUMBER() OVER (PARTITION BY bidder ORDER BY ts DESC) AS rn FROM bid) WHERE rn = 1) d
JOIN seller s ON d.auction = s.auction
