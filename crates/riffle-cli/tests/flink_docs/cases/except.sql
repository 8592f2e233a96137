SELECT auction FROM seller
EXCEPT
SELECT auction FROM bid WHERE price > 55
