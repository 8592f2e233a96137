"""Reads an Iceberg table with PyIceberg (a reader riffle did not write) and prints JSON:
the table's rows as sorted text lines, its snapshots' summaries from the current
snapshot back through its ancestors, the names of the data files any snapshot lists,
and the names of the files stored in the table's data directory.

usage: read_iceberg.py CATALOG_NAME CATALOG_URI WAREHOUSE NAMESPACE.TABLE
           [append ROW_JSON | filter ROW_FILTER]

CATALOG_URI is SQLAlchemy's: sqlite:////path/catalog.db, postgresql+psycopg2://user@host:port/db.
WAREHOUSE is file:///dir or s3://bucket/prefix; for S3 the server and credentials come
from AWS_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION.

With `append`, first appends one row (JSON object) as another writer would. With
`filter`, also prints the rows a scan with that row filter (PyIceberg's expression
syntax, e.g. "auction = 1007") returns: the scan prunes data files by their partition
values and column bounds, so a wrong partition value shows as a missing row. The
table's partition spec is printed as "transform(column)" terms.
"""
import json
import os
import sys
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs
from pyiceberg.catalog.sql import SqlCatalog

name, uri, warehouse, ident = sys.argv[1:5]
properties = {}
filesystem = fs.LocalFileSystem()
if warehouse.startswith("s3://"):
    endpoint = os.environ["AWS_ENDPOINT"]
    properties = {
        "s3.endpoint": endpoint,
        "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
        "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"],
        "s3.region": os.environ["AWS_REGION"],
    }
    filesystem = fs.S3FileSystem(
        endpoint_override=endpoint,
        access_key=os.environ["AWS_ACCESS_KEY_ID"],
        secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        region=os.environ["AWS_REGION"],
        scheme=urlparse(endpoint).scheme,
    )
catalog = SqlCatalog(name, uri=uri, warehouse=warehouse, **properties)
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


def lines_of(scan):
    rows = scan.to_arrow().to_pylist()
    return sorted(",".join(text(row[c]) for c in sorted(row)) for row in rows)


lines = lines_of(table.scan())
filtered = None
if len(sys.argv) > 5 and sys.argv[5] == "filter":
    filtered = lines_of(table.scan(row_filter=sys.argv[6]))
spec = [
    f"{field.transform}({table.schema().find_column_name(field.source_id)})"
    for field in table.spec().fields
]

summaries = []
snapshot = table.current_snapshot()
while snapshot is not None:
    summary = dict(snapshot.summary.additional_properties)
    summary["operation"] = str(snapshot.summary.operation.value)
    summaries.append(summary)
    parent = snapshot.parent_snapshot_id
    snapshot = table.snapshot_by_id(parent) if parent is not None else None

listed = set()
for snapshot in table.snapshots():
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
            listed.add(entry.data_file.file_path.rsplit("/", 1)[-1])

# The Parquet codec of each data file's first column chunk.
codecs = set()
for task in table.scan().plan_files():
    url = urlparse(task.file.file_path)
    path = url.netloc + url.path if url.scheme == "s3" else url.path
    with filesystem.open_input_file(path) as f:
        codecs.add(pq.ParquetFile(f).metadata.row_group(0).column(0).compression)

data_dir = urlparse(table.metadata.location.rstrip("/") + "/data")
data_path = data_dir.netloc + data_dir.path if data_dir.scheme == "s3" else data_dir.path
stored = [
    info.base_name
    for info in filesystem.get_file_info(
        fs.FileSelector(data_path, allow_not_found=True, recursive=True)
    )
    if info.type == fs.FileType.File
]

print(
    json.dumps(
        {
            "rows": lines,
            "snapshots": summaries,
            "listed": sorted(listed),
            "stored": sorted(stored),
            "spec": spec,
            "codecs": sorted(codecs),
            "filtered": filtered,
        }
    )
)
