-- Nexmark bids as JSON records on the Kafka topic `bids`: the input of
-- examples/kafka_to_postgres.sql. 1K events per second of event time, so the bids span
-- 50 s and the 10-second windows downstream close one after another. Run it with
-- --parallelism 1: two writers would interleave their events on each partition, out of
-- event-time order by seconds, and the reader's watermark would drop some as late. Exactly-once: records become visible to read_committed
-- consumers only when riffle's checkpoint commits their transaction.

CREATE TABLE bid (
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '50K', 'rate' = '1K');

CREATE TABLE bids WITH (
  'connector' = 'kafka',
  -- One record per batch, because the tansu test broker miscounts the offsets of bigger
  -- batches (a bounded reader would stop early). Drop this line for Apache Kafka or
  -- Redpanda: batching is some 20 times faster.
  'properties.batch.num.messages' = '1',
  'bootstrap.servers' = '127.0.0.1:9092',
  'topic' = 'bids',
  'format' = 'json'
);

INSERT INTO bids
SELECT auction, bidder, price, date_time FROM bid;
