-- People who created an auction in the 10 s window they registered in.
SELECT P.id, P.name, P.starttime
FROM (
    SELECT DISTINCT id, name,
           make_timestamp(epoch_ms("dateTime") // 10000 * 10000 * 1000) AS starttime
    FROM person
) P
JOIN (
    SELECT DISTINCT seller,
           make_timestamp(epoch_ms("dateTime") // 10000 * 10000 * 1000) AS starttime
    FROM auction
) A
ON P.id = A.seller AND P.starttime = A.starttime
