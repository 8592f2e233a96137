SELECT b.auction, b.price, s.seller
FROM (SELECT * FROM bid WHERE price > 58) b FULL JOIN seller s ON b.auction = s.auction
