SELECT auction FROM bid WHERE price > 55
UNION
SELECT auction FROM seller
