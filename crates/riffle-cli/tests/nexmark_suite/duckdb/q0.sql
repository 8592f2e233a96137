SELECT auction, bidder, price, "dateTime", extra FROM bid
