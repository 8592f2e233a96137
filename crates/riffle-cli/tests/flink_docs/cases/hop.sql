SELECT window_start, window_end, auction, COUNT(*) AS bids
FROM TABLE(HOP(TABLE bid, DESCRIPTOR(ts), INTERVAL '5' SECONDS, INTERVAL '10' SECONDS))
GROUP BY window_start, window_end, auction
