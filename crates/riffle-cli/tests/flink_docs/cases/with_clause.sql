WITH expensive AS (SELECT * FROM bid WHERE price > 30)
SELECT channel, COUNT(*) AS bids FROM expensive GROUP BY channel
