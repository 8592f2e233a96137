SELECT COUNT(*) AS bids, SUM(auction) AS auctions FROM bid
