-- SPLIT_INDEX is zero-based and NULL past the end; a DuckDB list index is one-based
-- and NULL past the end.
SELECT auction, bidder, price, channel,
       string_split(url, '/')[4], string_split(url, '/')[5], string_split(url, '/')[6]
FROM bid
