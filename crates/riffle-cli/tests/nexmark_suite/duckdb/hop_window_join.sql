-- Each row is in the windows [e - 2 s, e) with e the next two whole seconds past it.
WITH p AS (
    SELECT id, name, epoch_ms("dateTime") // 1000 * 1000 AS second FROM person
), a AS (
    SELECT id, seller, reserve, epoch_ms("dateTime") // 1000 * 1000 AS second FROM auction
), pw AS (
    SELECT id, name, unnest(range(second + 1000, second + 2001, 1000)) AS e FROM p
), aw AS (
    SELECT id, seller, reserve, unnest(range(second + 1000, second + 2001, 1000)) AS e FROM a
)
SELECT pw.id, pw.name, aw.id AS auction, aw.reserve,
       epoch_ms(pw.e - 2000) AS window_start, epoch_ms(pw.e) AS window_end
FROM pw JOIN aw ON pw.id = aw.seller AND pw.e = aw.e
