SELECT UPPER(channel) AS uc, COUNT(*) AS n
FROM bid
GROUP BY GROUPING SETS ((channel), (UPPER(channel)))
