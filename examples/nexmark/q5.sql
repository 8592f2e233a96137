-- Nexmark q5: hot items. Per hopping window (10 s, sliding every 2 s), the auctions with
-- the most bids: a window aggregate, then the rows holding each window's maximum.

CREATE TABLE bid (
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '10M');

CREATE VIEW auction_counts AS
SELECT auction, count(*) AS num, hop(INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS w
FROM bid
GROUP BY auction, w;

CREATE TABLE q5 WITH ('connector' = 'filesystem', 'path' = 'out/q5', 'format' = 'json');

INSERT INTO q5
SELECT c.auction, c.w['start'] AS window_start, c.w['end'] AS window_end, c.num
FROM auction_counts c
JOIN (SELECT w, max(num) AS max_num FROM auction_counts GROUP BY w) m
  ON c.w = m.w AND c.num = m.max_num;
