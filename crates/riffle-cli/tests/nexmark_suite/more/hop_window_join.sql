-- A window join on HOP windows: people and the auctions they opened in the same
-- 2-second window, windows starting every second. Each row is in two windows, so a
-- pair that shares both is joined once per window, as in Flink.
CREATE TABLE nexmark_hop_window_join (
  id BIGINT,
  name VARCHAR,
  auction BIGINT,
  reserve BIGINT,
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3)
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_hop_window_join
SELECT P.id, P.name, A.id, A.reserve, P.window_start, P.window_end
FROM TABLE(HOP(TABLE person, DESCRIPTOR(`dateTime`), INTERVAL '1' SECOND, INTERVAL '2' SECOND)) P
JOIN TABLE(HOP(TABLE auction, DESCRIPTOR(`dateTime`), INTERVAL '1' SECOND, INTERVAL '2' SECOND)) A
ON P.id = A.seller AND P.window_start = A.window_start AND P.window_end = A.window_end;
