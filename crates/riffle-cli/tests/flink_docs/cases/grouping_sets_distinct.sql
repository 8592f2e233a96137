SELECT DISTINCT channel
FROM bid
GROUP BY GROUPING SETS ((channel), (channel, auction))
