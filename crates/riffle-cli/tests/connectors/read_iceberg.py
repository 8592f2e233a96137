"""Reads an Iceberg table with PyIceberg (a reader riffle did not write) and prints JSON:
the table's rows as sorted text lines, and its snapshots' summaries from the current
snapshot back through its ancestors.

usage: read_iceberg.py CATALOG_NAME CATALOG_URI WAREHOUSE_DIR NAMESPACE.TABLE [append ROW_JSON]

CATALOG_URI is SQLAlchemy's: sqlite:////path/catalog.db, postgresql+psycopg2://user@host:port/db.

With `append`, first appends one row (JSON object) as another writer would.
"""
import json
import sys

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog

name, uri, warehouse, ident = sys.argv[1:5]
catalog = SqlCatalog(name, uri=uri, warehouse=f"file://{warehouse}")
table = catalog.load_table(ident)

if len(sys.argv) > 5 and sys.argv[5] == "append":
    row = json.loads(sys.argv[6])
    schema = table.schema().as_arrow()
    table.append(pa.Table.from_pylist([row], schema=schema))
    table = catalog.load_table(ident)


def text(value):
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


rows = table.scan().to_arrow().to_pylist()
lines = sorted(",".join(text(row[c]) for c in sorted(row)) for row in rows)

summaries = []
snapshot = table.current_snapshot()
while snapshot is not None:
    summary = dict(snapshot.summary.additional_properties)
    summary["operation"] = str(snapshot.summary.operation.value)
    summaries.append(summary)
    parent = snapshot.parent_snapshot_id
    snapshot = table.snapshot_by_id(parent) if parent is not None else None

print(json.dumps({"rows": lines, "snapshots": summaries}))
