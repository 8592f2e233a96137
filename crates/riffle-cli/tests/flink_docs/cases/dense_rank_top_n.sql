SELECT channel, auction, price, r
FROM (
  SELECT *, DENSE_RANK() OVER (PARTITION BY channel ORDER BY price DESC) AS r
  FROM bid)
WHERE r <= 2
