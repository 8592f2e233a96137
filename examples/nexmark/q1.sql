-- Nexmark q1: bids with the price converted from dollars to euros.

CREATE TABLE bid (
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '10M');

CREATE TABLE q1 WITH ('connector' = 'filesystem', 'path' = 'out/q1', 'format' = 'json');

INSERT INTO q1
SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid;
