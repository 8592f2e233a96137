-- A regular join whose keys are expressions on both sides.
CREATE TABLE nexmark_join_on_expressions (
  auction BIGINT,
  bidder BIGINT,
  name VARCHAR
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_join_on_expressions
SELECT B.auction, B.bidder, P.name
FROM bid B JOIN person P ON MOD(B.auction, 48) + 1000 = P.id * 1;
