SELECT window_start, window_end, MAX(price) AS top
FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(ts), INTERVAL '5' SECONDS, INTERVAL '20' SECONDS))
GROUP BY window_start, window_end
