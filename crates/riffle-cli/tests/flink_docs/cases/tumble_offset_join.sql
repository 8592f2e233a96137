SELECT l.window_start, l.window_end, l.auction, l.bids, r.seller
FROM (
  SELECT window_start, window_end, auction, COUNT(*) AS bids
  FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECONDS, INTERVAL '2' SECONDS))
  GROUP BY window_start, window_end, auction) l
JOIN (
  SELECT * FROM TABLE(TUMBLE(TABLE seller, DESCRIPTOR(ts), INTERVAL '10' SECONDS, INTERVAL '2' SECONDS))) r
ON l.auction = r.auction AND l.window_start = r.window_start AND l.window_end = r.window_end
