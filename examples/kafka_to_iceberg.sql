-- A Kafka topic of JSON bids (written by examples/nexmark_to_kafka.sql) → 10-second
-- tumbling windows → an Apache Iceberg table, exactly once: each checkpoint appends one
-- snapshot holding the windows it closed, and the snapshot's summary names the epoch,
-- so a restarted job never appends an epoch twice. Kill the job at any moment; `riffle
-- run` again resumes from the last checkpoint, and the table ends up with every window
-- once. The catalog is a SQLite file (no server); PyIceberg, Spark, Trino or DuckDB read
-- the table through it. Needs a riffle built with `--features iceberg`.

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
  'group.id' = 'riffle-bid-windows',
  -- Stop at the end of the topic as it is when the job first starts (the checkpoint
  -- remembers where that is); leave this out to read forever.
  'scan.bounded.mode' = 'latest-offset',
  -- At most 10K records per second, so that the demo runs long enough to be killed;
  -- leave this out to read at full speed.
  'scan.max-records-per-second' = '10K'
);

CREATE TABLE bid_windows (
  auction BIGINT,
  window_start TIMESTAMP,
  window_end TIMESTAMP,
  bids BIGINT,
  max_price BIGINT
) WITH (
  'connector' = 'iceberg',
  'catalog.uri' = 'sqlite:///tmp/riffle-lake/catalog.db',
  'warehouse' = 'file:///tmp/riffle-lake/warehouse',
  'table' = 'nexmark.bid_windows',
  'create' = 'true'
);

INSERT INTO bid_windows
SELECT auction, window_start, window_end, count(*) AS bids, max(price) AS max_price
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;
