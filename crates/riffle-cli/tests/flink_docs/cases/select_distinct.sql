SELECT DISTINCT channel, auction FROM bid
