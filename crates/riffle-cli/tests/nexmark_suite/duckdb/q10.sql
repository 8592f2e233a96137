SELECT auction, bidder, price, "dateTime", extra,
       strftime("dateTime", '%Y-%m-%d'), strftime("dateTime", '%H:%M')
FROM bid
