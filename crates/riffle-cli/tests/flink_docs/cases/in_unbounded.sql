SELECT auction, price FROM bid WHERE auction IN (SELECT auction FROM seller WHERE rating > 2)
