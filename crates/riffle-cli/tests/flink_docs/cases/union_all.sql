SELECT auction, price FROM bid WHERE price > 50
UNION ALL
SELECT auction, CAST(rating AS DOUBLE) FROM seller
