SELECT b.window_start, b.window_end, b.auction, b.price
FROM (SELECT * FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECONDS))) b
WHERE b.auction NOT IN (
  SELECT s.auction FROM (SELECT * FROM TABLE(TUMBLE(TABLE seller, DESCRIPTOR(ts), INTERVAL '10' SECONDS))) s
  WHERE s.window_start = b.window_start AND s.window_end = b.window_end)
