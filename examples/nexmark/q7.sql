-- Nexmark q7: the highest bids of every 10 s tumbling window, joined back to the bids.

CREATE TABLE bid (
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '10M');

CREATE TABLE q7 WITH ('connector' = 'filesystem', 'path' = 'out/q7', 'format' = 'json');

INSERT INTO q7
SELECT b.auction, b.price, b.bidder, b.date_time, b.extra
FROM (SELECT *, tumble(INTERVAL '10' SECOND) AS w FROM bid) b
JOIN (SELECT tumble(INTERVAL '10' SECOND) AS w, max(price) AS max_price FROM bid GROUP BY w) m
  ON b.w = m.w AND b.price = m.max_price;
