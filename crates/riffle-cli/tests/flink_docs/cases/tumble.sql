SELECT window_start, window_end, SUM(price) AS total
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECONDS))
GROUP BY window_start, window_end
