"""Answers one query with DuckDB over the oracle's input files.

usage: duckdb_answer.py INPUT_DIR QUERY_FILE
Prints one JSON array per result row. The views `ev` and `pay` read the same
JSON-lines files riffle reads, with the same declared column types.
"""
import json
import sys

import duckdb

input_dir, query_file = sys.argv[1], sys.argv[2]
con = duckdb.connect()
con.execute(
    f"""CREATE VIEW ev AS SELECT * FROM read_json('{input_dir}/ev/*.jsonl',
        format = 'newline_delimited',
        columns = {{'id': 'BIGINT', 'k': 'BIGINT', 'v': 'BIGINT', 's': 'VARCHAR', 'ts': 'BIGINT'}})"""
)
con.execute(
    f"""CREATE VIEW pay AS SELECT * FROM read_json('{input_dir}/pay/*.jsonl',
        format = 'newline_delimited',
        columns = {{'id': 'BIGINT', 'k': 'BIGINT', 'amount': 'BIGINT', 'ts': 'BIGINT'}})"""
)
with open(query_file) as f:
    query = f.read()
for row in con.execute(query).fetchall():
    print(json.dumps([int(v) if isinstance(v, int) else v for v in row]))
