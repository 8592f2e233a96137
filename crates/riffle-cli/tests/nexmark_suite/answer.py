"""Both answers of one suite query as canonical JSON rows.

usage: answer.py INPUT_DIR REFERENCE_SQL RIFFLE_ROWS COLUMNS_JSON [RIFFLE_REDUCE_SQL]
Prints {"duckdb": [...], "riffle": [...]}: DuckDB's answer to REFERENCE_SQL over the
suite's input files, and riffle's rows (a JSON-lines file) read with the sink's column
types. Both go through the same conversion, so only values can differ.

RIFFLE_ROWS may instead be a directory of CSV files in Hive-style partitions (a
partitioned sink's output), which DuckDB reads itself with hive_partitioning; the
columns marked "partition" in COLUMNS_JSON come from the directory names.

A result that depends on when it was computed (processing time, q12) cannot equal a
batch answer row for row; RIFFLE_REDUCE_SQL then turns riffle's rows (the view
`riffle`) into what does not depend on it, e.g. per-key totals of aligned windows.
"""
import datetime
import decimal
import json
import os
import sys

import duckdb

input_dir, reference, riffle_rows, columns = sys.argv[1:5]
reduce = sys.argv[5] if len(sys.argv) > 5 else None
columns = json.loads(columns)
con = duckdb.connect()
con.execute("SET TimeZone = 'UTC'")
tables = {
    "person": {"id": "BIGINT", "name": "VARCHAR", "emailAddress": "VARCHAR",
               "creditCard": "VARCHAR", "city": "VARCHAR", "state": "VARCHAR",
               "dateTime": "BIGINT", "extra": "VARCHAR"},
    "auction": {"id": "BIGINT", "itemName": "VARCHAR", "description": "VARCHAR",
                "initialBid": "BIGINT", "reserve": "BIGINT", "dateTime": "BIGINT",
                "expires": "BIGINT", "seller": "BIGINT", "category": "BIGINT",
                "extra": "VARCHAR"},
    "bid": {"auction": "BIGINT", "bidder": "BIGINT", "price": "BIGINT",
            "channel": "VARCHAR", "url": "VARCHAR", "dateTime": "BIGINT",
            "extra": "VARCHAR"},
    "tick": {"id": "BIGINT", "v": "BIGINT", "dateTime": "BIGINT"},
}
for name, cols in tables.items():
    # Event times are epoch milliseconds in the files, TIMESTAMP(3) in the tables.
    select = ", ".join(
        f'epoch_ms("{c}") AS "{c}"' if c in ("dateTime", "expires") else f'"{c}"'
        for c in cols
    )
    con.execute(
        f"""CREATE VIEW {name} AS SELECT {select} FROM read_json('{input_dir}/{name}/*.jsonl',
            format = 'newline_delimited', columns = {json.dumps(cols)})"""
    )


con.execute(
    f"""CREATE VIEW side_input AS SELECT * FROM read_csv('{input_dir}/side_input/*.csv',
        header = true, columns = {{'key': 'BIGINT', 'value': 'VARCHAR'}})"""
)


def canonical(row):
    out = []
    for v in row:
        if isinstance(v, datetime.datetime):
            v = v.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        elif isinstance(v, decimal.Decimal):
            v = str(v)
        elif isinstance(v, float):
            v = repr(v)
        out.append(v)
    return json.dumps(out)


with open(reference) as f:
    duck = con.execute(f.read()).fetchall()
if os.path.isdir(riffle_rows):
    # CSV cannot tell an empty text from NULL (Flink's csv format writes both as an
    # empty field): text columns are compared with NULL read as ''.
    text = [i for i, c in enumerate(columns) if c["duckdb_type"] == "VARCHAR"]
    duck = [tuple("" if (v is None and i in text) else v for i, v in enumerate(r)) for r in duck]
duck = [canonical(r) for r in duck]
types = {c["name"]: c["duckdb_type"] for c in columns}
riffle = []
if os.path.isdir(riffle_rows):
    data = {c["name"]: c["duckdb_type"] for c in columns if not c.get("partition")}
    parts = {c["name"]: c["duckdb_type"] for c in columns if c.get("partition")}
    names = ", ".join(
        f'coalesce("{c["name"]}", \'\') AS "{c["name"]}"' if c["duckdb_type"] == "VARCHAR" else f'"{c["name"]}"'
        for c in columns
    )
    con.execute(
        f"""CREATE VIEW riffle AS SELECT {names} FROM read_csv('{riffle_rows}/**/*.csv',
            header = true, hive_partitioning = true, columns = {json.dumps(data)},
            hive_types = {json.dumps(parts)})"""
    )
    empty = False
else:
    with open(riffle_rows) as f:
        empty = not f.read().strip()
if not empty:
    if not os.path.isdir(riffle_rows):
        con.execute(
            f"CREATE VIEW riffle AS SELECT * FROM read_json('{riffle_rows}', format = 'newline_delimited', columns = {json.dumps(types)})"
        )
    query = "SELECT * FROM riffle"
    if reduce:
        with open(reduce) as f:
            query = f.read()
    riffle = [canonical(r) for r in con.execute(query).fetchall()]
print(json.dumps({"duckdb": sorted(duck), "riffle": sorted(riffle)}))
