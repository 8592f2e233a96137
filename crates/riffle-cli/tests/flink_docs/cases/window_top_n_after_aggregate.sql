SELECT *
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY total DESC) AS rn
  FROM (
    SELECT window_start, window_end, channel, SUM(price) AS total, COUNT(*) AS bids
    FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECONDS))
    GROUP BY window_start, window_end, channel))
WHERE rn <= 2
