"""Answers one query with DuckDB over the oracle's input files.

usage: duckdb_answer.py INPUT_DIR QUERY_FILE LATE_ID_FROM ROWS
Prints one JSON array per result row. The views `ev` and `pay` read the same
JSON-lines files riffle reads, with the same declared column types: every row
when ROWS is `all`, only the rows on time (ids up to LATE_ID_FROM) when it is
`on_time`. `ev_late` and `pay_late` hold the late rows.
"""
import json
import sys

import duckdb

input_dir, query_file, late_id_from, rows = sys.argv[1:5]
late_id_from = int(late_id_from)
assert rows in ("all", "on_time"), rows
con = duckdb.connect()
columns = {
    "ev": "{'id': 'BIGINT', 'k': 'BIGINT', 'v': 'BIGINT', 's': 'VARCHAR', 'ts': 'BIGINT'}",
    "pay": "{'id': 'BIGINT', 'k': 'BIGINT', 'amount': 'BIGINT', 'ts': 'BIGINT'}",
}
for stream, types in columns.items():
    con.execute(
        f"""CREATE VIEW {stream}_all AS SELECT * FROM read_json('{input_dir}/{stream}/*.jsonl',
            format = 'newline_delimited', columns = {types})"""
    )
    on_time = f" WHERE id <= {late_id_from}" if rows == "on_time" else ""
    con.execute(f"CREATE VIEW {stream} AS SELECT * FROM {stream}_all{on_time}")
    con.execute(
        f"CREATE VIEW {stream}_late AS SELECT * FROM {stream}_all WHERE id > {late_id_from}"
    )
with open(query_file) as f:
    query = f.read()
for row in con.execute(query).fetchall():
    print(json.dumps([int(v) if isinstance(v, int) else v for v in row]))
