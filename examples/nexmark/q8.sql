-- Nexmark q8: people who opened an auction in the same 10 s window they registered in.
-- A window semi join: each person once per window in which they sold something.

CREATE TABLE person (
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH ('connector' = 'nexmark', 'event_type' = 'person', 'events' = '10M');

CREATE TABLE auction (
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH ('connector' = 'nexmark', 'event_type' = 'auction', 'events' = '10M');

CREATE TABLE q8 WITH ('connector' = 'filesystem', 'path' = 'out/q8', 'format' = 'json');

INSERT INTO q8
SELECT p.id, p.name, p.w['start'] AS window_start
FROM (SELECT id, name, tumble(INTERVAL '10' SECOND) AS w FROM person) p
WHERE EXISTS (
  SELECT 1 FROM (SELECT seller, tumble(INTERVAL '10' SECOND) AS w FROM auction) a
  WHERE a.seller = p.id AND a.w = p.w
);
