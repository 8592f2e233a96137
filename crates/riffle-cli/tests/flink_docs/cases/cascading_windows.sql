CREATE VIEW window1 AS
SELECT auction, window_start AS inner_start, window_end AS inner_end, window_time AS rowtime, SUM(price) AS total
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '5' SECONDS))
GROUP BY auction, window_start, window_end, window_time;
SELECT window_start, window_end, SUM(total) AS total
FROM TABLE(TUMBLE(TABLE window1, DESCRIPTOR(rowtime), INTERVAL '10' SECONDS))
GROUP BY window_start, window_end
