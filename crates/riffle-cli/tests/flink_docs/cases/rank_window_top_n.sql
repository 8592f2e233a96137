SELECT *
FROM (
  SELECT window_start, window_end, bidder, bids,
    RANK() OVER (PARTITION BY window_start, window_end ORDER BY bids DESC) AS r
  FROM (
    SELECT window_start, window_end, bidder, COUNT(*) AS bids
    FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECONDS))
    GROUP BY window_start, window_end, bidder))
WHERE r <= 2
