SELECT auction, price, window_start, window_end, window_time
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECONDS, INTERVAL '7' SECONDS))
WHERE price > 50
