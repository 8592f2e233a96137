SELECT auction, bidder, CAST(0.908 * price AS DECIMAL(23, 3)), "dateTime", extra FROM bid
