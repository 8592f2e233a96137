-- Nexmark q11: bids per bidder per session (a session ends after 10 s without bids).

CREATE TABLE bid (
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '10M');

CREATE VIEW sessions AS
SELECT bidder, count(*) AS bid_count, session(INTERVAL '10' SECOND) AS w
FROM bid
GROUP BY bidder, w;

CREATE TABLE q11 WITH ('connector' = 'filesystem', 'path' = 'out/q11', 'format' = 'json');

INSERT INTO q11
SELECT bidder, bid_count, w['start'] AS window_start, w['end'] AS window_end FROM sessions;
