SELECT *
FROM (
  SELECT window_start, window_end, auction, price,
    ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rn
  FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECONDS)))
WHERE rn BETWEEN 2 AND 3
