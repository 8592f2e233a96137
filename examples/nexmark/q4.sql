-- Nexmark q4: average closing price per category.
-- An auction's closing price is its highest bid between its start and its expiry, known
-- once the watermark passes the expiry. The average is an updating result: q4 declares a
-- primary key, and the newest row per category is the current value.

CREATE TABLE auction (
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH ('connector' = 'nexmark', 'event_type' = 'auction', 'events' = '10M');

CREATE TABLE bid (
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH ('connector' = 'nexmark', 'event_type' = 'bid', 'events' = '10M');

CREATE VIEW closing_price AS
SELECT a.id, a.category, max(b.price) AS final
FROM auction a JOIN bid b ON a.id = b.auction
WHERE b.date_time BETWEEN a.date_time AND a.expires
GROUP BY a.id, a.category;

CREATE TABLE q4 (category BIGINT, avg_final DOUBLE, PRIMARY KEY (category))
WITH ('connector' = 'filesystem', 'path' = 'out/q4', 'format' = 'json');

-- AVG of a BIGINT is a truncated BIGINT, as in Flink; the DOUBLE average is asked for.
INSERT INTO q4
SELECT category, avg(CAST(final AS DOUBLE)) AS avg_final FROM closing_price GROUP BY category;
