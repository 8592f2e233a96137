SELECT b.auction, b.price, s.seller
FROM bid b, seller s
WHERE b.auction = s.auction AND b.ts BETWEEN s.ts - INTERVAL '5' SECOND AND s.ts + INTERVAL '5' SECOND
