-- Window Top-N straight over a window TVF's rows: the two highest bids of each
-- 10-second window.
CREATE TABLE nexmark_window_top_n_rows (
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  auction BIGINT,
  price BIGINT,
  rownum BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_window_top_n_rows
SELECT window_start, window_end, auction, price, rownum FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rownum
  FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
) WHERE rownum <= 2;
