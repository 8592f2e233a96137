SELECT auction, bidder, CAST(0.908 * price AS DECIMAL(23, 3)),
       CASE
           WHEN hour("dateTime") >= 8 AND hour("dateTime") <= 18 THEN 'dayTime'
           WHEN hour("dateTime") <= 6 OR hour("dateTime") >= 20 THEN 'nightTime'
           ELSE 'otherTime'
       END,
       "dateTime", extra,
       length(extra) - length(replace(extra, 'c', ''))
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000
