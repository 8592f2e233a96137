SELECT auction FROM bid WHERE price > 55
INTERSECT
SELECT auction FROM seller
