SELECT B.auction, B.bidder, P.name FROM bid B JOIN person P ON B.auction % 48 + 1000 = P.id
