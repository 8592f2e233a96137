-- The pipeline every worker runs (mounted from the ConfigMap the kustomization makes
-- of this file): Kafka bids in, per-auction window statistics out to PostgreSQL. The
-- PostgreSQL sink's prepared transactions are committed by worker 0 for every worker.

CREATE TABLE bids (
  auction BIGINT,
  bidder BIGINT,
  price BIGINT,
  date_time TIMESTAMP,
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH (
  'connector' = 'kafka',
  'bootstrap.servers' = 'kafka:9092',
  'topic' = 'bids',
  'format' = 'json',
  'group.id' = 'riffle-bid-stats'
);

CREATE TABLE bid_stats (
  auction BIGINT,
  window_start TIMESTAMP,
  window_end TIMESTAMP,
  bids BIGINT,
  max_price BIGINT,
  PRIMARY KEY (auction, window_start)
) WITH (
  'connector' = 'postgres',
  'url' = 'postgres://riffle@postgres:5432/riffle',
  'password.env' = 'PGPASSWORD',
  'create' = 'true'
);

INSERT INTO bid_stats
SELECT auction, w['start'] AS window_start, w['end'] AS window_end, bids, max_price
FROM (SELECT auction, count(*) AS bids, max(price) AS max_price,
             tumble(INTERVAL '10' SECOND) AS w
      FROM bids
      GROUP BY auction, w) per_window;
