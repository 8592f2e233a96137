-- A Kafka topic of JSON bids → 10-second tumbling windows → a PostgreSQL table, exactly
-- once: each window's row is written in the transaction of the checkpoint that emits
-- it, prepared at the barrier and committed with the checkpoint. Kill the job at any
-- moment; `riffle run` again resumes from the last checkpoint, and the table ends up
-- with every window once.

CREATE TABLE bids (
  auction BIGINT,
  bidder BIGINT,
  price BIGINT,
  date_time TIMESTAMP,
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH (
  'connector' = 'kafka',
  'bootstrap.servers' = '127.0.0.1:9092',
  'topic' = 'bids',
  'format' = 'json',
  'group.id' = 'riffle-bid-stats',
  -- Stop at the end of the topic as it is when the job first starts (the checkpoint
  -- remembers where that is); leave this out to read forever.
  'scan.bounded.mode' = 'latest-offset',
  -- At most 10K records per second, so that the demo runs long enough to be killed;
  -- leave this out to read at full speed.
  'scan.max-records-per-second' = '10K'
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
  'url' = 'postgres://riffle@127.0.0.1:5432/riffle',
  'create' = 'true'
);

INSERT INTO bid_stats
SELECT auction, w['start'] AS window_start, w['end'] AS window_end, bids, max_price
FROM (SELECT auction, count(*) AS bids, max(price) AS max_price,
             tumble(INTERVAL '10' SECOND) AS w
      FROM bids
      GROUP BY auction, w) per_window;
