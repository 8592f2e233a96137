-- riffle's q12 rows, reduced to what does not depend on the clock: per bidder, the
-- total of its windows' counts, over windows that are 10 s long, start on a multiple
-- of 10 s, and lie in processing time (after every event time of the input, which is
-- from 2023). A window that fails any of these drops its counts, so the totals differ.
SELECT bidder, CAST(sum(bid_count) AS BIGINT) AS bids
FROM riffle
WHERE endtime - starttime = INTERVAL 10 SECOND
  AND epoch_ms(starttime) % 10000 = 0
  AND starttime > (SELECT max("dateTime") FROM bid)
GROUP BY bidder
