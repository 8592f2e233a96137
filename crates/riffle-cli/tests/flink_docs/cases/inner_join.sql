SELECT b.auction, b.bidder, s.seller, s.rating
FROM bid b JOIN seller s ON b.auction = s.auction
