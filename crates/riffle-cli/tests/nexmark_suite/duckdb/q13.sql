SELECT b.auction, b.bidder, b.price, b."dateTime", s."value"
FROM bid AS b
JOIN side_input AS s ON b.auction % 10000 = s.key
