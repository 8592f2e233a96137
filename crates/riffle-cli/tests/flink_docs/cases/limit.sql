SELECT auction, price FROM bid LIMIT 5
