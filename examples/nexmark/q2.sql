-- Nexmark q2: bids on auctions whose id is a multiple of 123.

CREATE TABLE bid (
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '10M');

CREATE TABLE q2 WITH ('connector' = 'filesystem', 'path' = 'out/q2', 'format' = 'json');

INSERT INTO q2
SELECT auction, price FROM bid WHERE auction % 123 = 0;
