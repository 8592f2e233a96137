SELECT channel, auction, price
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY channel ORDER BY price DESC) AS rn
  FROM bid)
WHERE rn < 2.5
