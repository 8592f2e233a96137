-- Hopping windows of 10 s every 2 s from the epoch: a bid at t is in the five windows
-- starting at t rounded down to 2 s, less 0, 2, 4, 6 and 8 s.
WITH AuctionBids AS (
    SELECT auction, count(*) AS num, ws AS starttime, ws + INTERVAL 10 SECOND AS endtime
    FROM (
        SELECT auction,
               make_timestamp((epoch_ms("dateTime") // 2000 * 2000 - k * 2000) * 1000) AS ws
        FROM bid, range(0, 5) AS r(k)
    )
    GROUP BY auction, ws
),
MaxBids AS (
    SELECT max(num) AS maxn, starttime, endtime FROM AuctionBids GROUP BY starttime, endtime
)
SELECT A.auction, A.num
FROM AuctionBids A JOIN MaxBids M
  ON A.starttime = M.starttime AND A.endtime = M.endtime AND A.num >= M.maxn
