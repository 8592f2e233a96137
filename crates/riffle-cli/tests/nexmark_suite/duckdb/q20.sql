SELECT B.auction, B.bidder, B.price, B.channel, B.url, B."dateTime", B.extra,
       A.itemName, A.description, A.initialBid, A.reserve, A."dateTime", A.expires,
       A.seller, A.category, A.extra
FROM bid B JOIN auction A ON B.auction = A.id
WHERE A.category = 10
