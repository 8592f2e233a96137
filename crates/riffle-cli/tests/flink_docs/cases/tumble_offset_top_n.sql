SELECT *
FROM (
  SELECT window_start, window_end, auction, price,
    ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rn
  FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECONDS, INTERVAL '3' SECONDS)))
WHERE rn <= 2
