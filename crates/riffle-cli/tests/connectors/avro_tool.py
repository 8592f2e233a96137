"""fastavro, the independent Avro implementation on the other side of riffle's Kafka Avro
tests: it writes the record values riffle reads, and reads the values riffle writes.

  avro_tool.py write <schema.json> <rows.jsonl> <out-dir> [<registry-url> <subject>]
      Each row of rows.jsonl becomes out-dir/<n>.avro, one Avro datum (binary
      encoding). With a registry: the schema is registered under the subject first, and
      each value is framed in Confluent's wire format (magic 0, 4-byte big-endian id).
  avro_tool.py read <in-dir> (<schema.json> | <registry-url>)
      Each in-dir/<n>.avro, in order, decoded with the schema (or, framed, with the
      schema its id names in the registry) and printed as one JSON line.
"""

import io
import json
import os
import struct
import sys
import urllib.request

import fastavro


def registry_call(url, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/vnd.schemaregistry.v1+json"}
    )
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())


def write(schema_file, rows_file, out_dir, registry=None, subject=None):
    text = open(schema_file).read()
    schema = fastavro.parse_schema(json.loads(text))
    prefix = b""
    if registry:
        id = registry_call(f"{registry}/subjects/{subject}/versions", {"schema": text})["id"]
        prefix = b"\0" + struct.pack(">I", id)
    os.makedirs(out_dir, exist_ok=True)
    for n, line in enumerate(open(rows_file)):
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, schema, json.loads(line))
        with open(os.path.join(out_dir, f"{n:06}.avro"), "wb") as f:
            f.write(prefix + buffer.getvalue())


def read(in_dir, schema_or_registry):
    fixed = None
    if not schema_or_registry.startswith("http"):
        fixed = fastavro.parse_schema(json.load(open(schema_or_registry)))
    by_id = {}
    for name in sorted(os.listdir(in_dir)):
        value = open(os.path.join(in_dir, name), "rb").read()
        schema = fixed
        if fixed is None:
            assert value[0] == 0, f"{name}: no Confluent magic byte"
            (id,) = struct.unpack(">I", value[1:5])
            if id not in by_id:
                answer = registry_call(f"{schema_or_registry}/schemas/ids/{id}")
                by_id[id] = fastavro.parse_schema(json.loads(answer["schema"]))
            schema, value = by_id[id], value[5:]
        buffer = io.BytesIO(value)
        record = fastavro.schemaless_reader(buffer, schema, None)
        assert buffer.read() == b"", f"{name}: bytes left after the datum"
        print(json.dumps(record, sort_keys=True))


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(*sys.argv[2:])
    else:
        read(*sys.argv[2:])
