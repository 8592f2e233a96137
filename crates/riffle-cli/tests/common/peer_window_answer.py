"""DuckDB's answer to the peer window job (10 s tumbling COUNT(*), SUM(v) per k) over
a `sequence` table of N rows read at parallelism P, compared with riffle's committed
JSON-lines output. Subtask j of P reads ids [N*j/P, N*(j+1)/P) and stamps each with
(id - first id) * P / 100 ms of event time (docs/sql.md, `sequence`).

Usage: peer_window_answer.py N P OUTPUT_DIR; prints {"rows", "missing", "extra"} as JSON.
"""
import duckdb, json, sys
n, p, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ranges = ", ".join(f"({n * j // p}, {n * (j + 1) // p})" for j in range(p))
con = duckdb.connect()
con.sql(f"""CREATE TABLE answer AS
WITH s(lo, hi) AS (VALUES {ranges}),
rows AS (SELECT r.range AS id, (r.range - s.lo) * {p} * 10000 // 1000000 AS ts_ms
         FROM s, range(s.lo, s.hi) r)
SELECT id % 1000 AS k, ts_ms // 10000 * 10000 AS start_ms, count(*) AS cnt, sum(id % 97) AS sum_v
FROM rows GROUP BY ALL""")
con.sql(f"""CREATE TABLE riffle AS SELECT k, epoch_ms(window_start::TIMESTAMP) AS start_ms, cnt, sum_v
FROM read_json('{out}/*.jsonl')""")
print(json.dumps({
    "rows": con.sql("SELECT count(*) FROM answer").fetchone()[0],
    "missing": con.sql("SELECT * FROM answer EXCEPT ALL SELECT * FROM riffle LIMIT 5").fetchall(),
    "extra": con.sql("SELECT * FROM riffle EXCEPT ALL SELECT * FROM answer LIMIT 5").fetchall(),
}))
