SELECT auction, CAST(price AS DECIMAL(10, 3)) / 7 AS decimal_seventh FROM bid
