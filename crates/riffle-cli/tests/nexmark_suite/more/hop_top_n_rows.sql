-- Window Top-N straight over a HOP function's rows: the two highest bids of each
-- 2-second window, windows starting every second (a bid competes in both its windows).
CREATE TABLE nexmark_hop_top_n_rows (
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  auction BIGINT,
  price BIGINT,
  rownum BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_hop_top_n_rows
SELECT window_start, window_end, auction, price, rownum FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rownum
  FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '1' SECOND, INTERVAL '2' SECOND))
) WHERE rownum <= 2;
