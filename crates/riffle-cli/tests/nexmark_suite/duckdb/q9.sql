SELECT id, itemName, description, initialBid, reserve, "dateTime", expires, seller, category,
       extra, auction, bidder, price, bid_dateTime, bid_extra
FROM (
    SELECT A.*, B.auction, B.bidder, B.price, B."dateTime" AS bid_dateTime, B.extra AS bid_extra,
           row_number() OVER (PARTITION BY A.id ORDER BY B.price DESC, B."dateTime" ASC) AS rownum
    FROM auction A JOIN bid B
      ON A.id = B.auction AND B."dateTime" BETWEEN A."dateTime" AND A.expires
)
WHERE rownum <= 1
