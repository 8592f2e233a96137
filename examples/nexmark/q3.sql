-- Nexmark q3: sellers in Oregon, Idaho or California with their auctions in category 10.
-- An unbounded join: both sides are kept for the life of the job.

CREATE TABLE auction (
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH ('connector' = 'nexmark', 'event_type' = 'auction', 'events' = '10M');

CREATE TABLE person (
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH ('connector' = 'nexmark', 'event_type' = 'person', 'events' = '10M');

CREATE TABLE q3 WITH ('connector' = 'filesystem', 'path' = 'out/q3', 'format' = 'json');

INSERT INTO q3
SELECT p.name, p.city, p.state, a.id
FROM auction a JOIN person p ON a.seller = p.id
WHERE a.category = 10 AND p.state IN ('OR', 'ID', 'CA');
