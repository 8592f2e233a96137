-- Nexmark q0: every bid, passed through.
-- Run: riffle run examples/nexmark/q0.sql   (rows land in out/q0/*.jsonl)

CREATE TABLE bid (
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '10M');

CREATE TABLE q0 WITH ('connector' = 'filesystem', 'path' = 'out/q0', 'format' = 'json');

INSERT INTO q0
SELECT auction, bidder, price, date_time, extra FROM bid;
