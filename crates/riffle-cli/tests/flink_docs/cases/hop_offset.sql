SELECT window_start, window_end, COUNT(*) AS bids
FROM TABLE(HOP(TABLE bid, DESCRIPTOR(ts), INTERVAL '5' SECONDS, INTERVAL '10' SECONDS, INTERVAL '1' SECONDS))
GROUP BY window_start, window_end
