SELECT window_start, window_end, COUNT(*) AS bids
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECONDS, INTERVAL '2' SECONDS))
GROUP BY window_start, window_end
