SELECT b.auction, b.price, s.seller
FROM bid b LEFT JOIN seller s ON b.auction = s.auction AND s.rating > 3
