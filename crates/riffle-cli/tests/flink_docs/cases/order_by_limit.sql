SELECT auction, price FROM bid ORDER BY ts LIMIT 5
