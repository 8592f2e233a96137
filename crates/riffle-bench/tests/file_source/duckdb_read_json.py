"""DuckDB's reading of JSON lines, one line at a time (the reader differential test,
duckdb_reader.rs): read_json with explicit column types on a file of that line alone,
so that each line is read or refused on its own.

usage: duckdb_read_json.py LINES_FILE COLUMNS_JSON
Prints one line per input line: `R` when DuckDB refuses it, else `OK ` and the row as
`ts|n|f|s|d`: ts in microseconds since the epoch, n, f as its IEEE bits (a signed
64-bit integer), s as the hex of its UTF-8 bytes, d as DuckDB's text; `N` for NULL.
"""
import json
import os
import struct
import sys
import tempfile

import duckdb

lines_file, columns_json = sys.argv[1], sys.argv[2]
columns = json.loads(columns_json)
con = duckdb.connect()
# (Every column is selected: DuckDB checks a key twice only in the columns it reads.)
select = ", ".join(
    [
        "id",
        "epoch_us(ts)",
        "n",
        "f",
        "s",
        "d::VARCHAR" if "d" in columns else "NULL",
    ]
)
one = os.path.join(tempfile.mkdtemp(), "one.jsonl")
with open(lines_file, "rb") as fh:
    lines = fh.read().split(b"\n")
if lines and lines[-1] == b"":
    lines.pop()


def cell(value, kind):
    if value is None:
        return "N"
    if kind == "f":
        return str(struct.unpack("<q", struct.pack("<d", value))[0])
    if kind == "s":
        return value.encode("utf-8").hex()
    return str(value)


for line in lines:
    with open(one, "wb") as fh:
        fh.write(line + b"\n")
    try:
        rows = con.execute(
            f"SELECT {select} FROM read_json(?, format = 'newline_delimited', columns = {columns})",
            [one],
        ).fetchall()
    except duckdb.Error:
        print("R")
        continue
    except UnicodeDecodeError:
        # DuckDB read the line into text that is not UTF-8 (a bug of DuckDB's: see
        # duckdb_reader.rs); riffle must refuse such a line.
        print("BAD")
        continue
    if len(rows) != 1:
        print("R")
        continue
    row = rows[0][1:]
    print("OK " + "|".join(cell(v, k) for v, k in zip(row, "tnfsd")))
