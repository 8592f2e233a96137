SELECT auction, bidder, price
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY ts ASC) AS rn
  FROM bid)
WHERE rn = 1
