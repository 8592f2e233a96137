SELECT auction, price FROM bid b WHERE EXISTS (SELECT * FROM seller s WHERE s.auction = b.auction)
