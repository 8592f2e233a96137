-- q12 counts each bid in the 10 s window of the wall clock when it was read, so which
-- window depends on the run; each bidder's total over all windows does not.
SELECT bidder, count(*) AS bids
FROM bid
GROUP BY bidder
