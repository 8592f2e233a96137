SELECT *
FROM bid
  MATCH_RECOGNIZE (
    PARTITION BY auction
    ORDER BY ts
    MEASURES A.price AS first_price, B.price AS next_price
    ONE ROW PER MATCH
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (A B)
    DEFINE B AS B.price > A.price)
