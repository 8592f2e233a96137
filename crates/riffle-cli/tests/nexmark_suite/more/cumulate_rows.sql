-- The rows of a CUMULATE table function, not grouped: one row per window holding the
-- bid ([s, s+1s) and [s, s+2s), s a multiple of 2 s), with the window's bounds; the
-- condition reads the bounds, so it is decided per window.
CREATE TABLE nexmark_cumulate_rows (
  auction BIGINT,
  price BIGINT,
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  window_time TIMESTAMP(3)
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_cumulate_rows
SELECT auction, price, window_start, window_end, window_time
FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '1' SECOND, INTERVAL '2' SECOND))
WHERE MOD(auction, 10) = 7
  AND (price > 100000 OR window_end < window_start + INTERVAL '2' SECOND);
