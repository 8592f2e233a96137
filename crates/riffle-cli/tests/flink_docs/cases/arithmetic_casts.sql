SELECT auction, price,
  price / 3 AS third,
  auction / 4 AS quarter,
  bidder % 7 AS rest,
  -bidder / 3 AS negative_third,
  CAST(price AS BIGINT) AS as_bigint,
  CAST(-price AS INT) AS as_int,
  CAST(price AS DECIMAL(10, 2)) AS as_decimal,
  CAST(price AS DECIMAL(10, 3)) * CAST(bidder AS DECIMAL(5, 1)) AS decimal_product,
  CAST(CAST(price AS DECIMAL(10, 3)) AS INT) AS decimal_as_int,
  CAST(price AS VARCHAR) AS as_text
FROM bid
