SELECT window_start, window_end, channel, COUNT(*) AS bids
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECONDS))
GROUP BY window_start, window_end, GROUPING SETS ((channel), ())
