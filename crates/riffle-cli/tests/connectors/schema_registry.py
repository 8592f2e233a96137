"""A stand-in for the Confluent schema registry, for the Avro tests: no registry server is
installable here, so this implements the documented REST subset riffle and the tests
use, from Confluent's API reference (Schema Registry API, "Schemas", "Subjects",
"Compatibility"):

  POST /subjects/{subject}/versions   {"schema": "<Avro JSON>"} -> {"id": n}
      The same schema again under the subject: its id. A new one is checked against
      the subject's latest version by the subject's compatibility level (BACKWARD by
      default: the new schema must read data written with the latest) and refused with
      409 {"error_code": 409, "message": ...} when it cannot. Ids are global and
      shared by equal schemas across subjects.
  GET  /schemas/ids/{id}              -> {"schema": "<Avro JSON>"}   (404, error_code 40403)
  GET  /subjects                      -> ["subject", ...]
  GET  /subjects/{subject}/versions/latest -> {"subject", "version", "id", "schema"}
  PUT  /config/{subject}              {"compatibility": "BACKWARD" | "NONE"}

Usage: python schema_registry.py <port-file>   (listens on 127.0.0.1, a free port)
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

schemas = []  # id - 1 -> canonical schema text
subjects = {}  # subject -> [id, ...] (versions in order)
compatibility = {}  # subject -> level

PROMOTIONS = {
    "int": {"int", "long", "float", "double"},
    "long": {"long", "float", "double"},
    "float": {"float", "double"},
    "string": {"string", "bytes"},
    "bytes": {"bytes", "string"},
}


def canonical(schema):
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def type_name(t):
    if isinstance(t, dict):
        return t.get("type")
    return t


def readable(writer, reader):
    """Whether data written with `writer` can be read with `reader` (Avro's rules, for
    the types these tests use: primitives, unions, records)."""
    if isinstance(writer, list):
        return all(readable(w, reader) for w in writer)
    if isinstance(reader, list):
        return any(readable(writer, r) for r in reader)
    wn, rn = type_name(writer), type_name(reader)
    if wn == "record" or rn == "record":
        if wn != rn:
            return False
        writer_fields = {f["name"]: f for f in writer["fields"]}
        for field in reader["fields"]:
            if field["name"] in writer_fields:
                if not readable(writer_fields[field["name"]]["type"], field["type"]):
                    return False
            elif "default" not in field:
                return False
        return True
    return rn in PROMOTIONS.get(wn, {wn})


class Handler(BaseHTTPRequestHandler):
    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        length = int(self.headers.get("Content-Length", "0"))
        return json.loads(self.rfile.read(length) or b"{}")

    def do_POST(self):
        parts = self.path.strip("/").split("/")
        if len(parts) != 3 or parts[0] != "subjects" or parts[2] != "versions":
            return self.answer(404, {"error_code": 404, "message": "not found"})
        subject = parts[1]
        try:
            schema = json.loads(self.body()["schema"])
        except (KeyError, ValueError) as e:
            return self.answer(422, {"error_code": 42201, "message": f"Invalid schema: {e}"})
        text = canonical(schema)
        versions = subjects.setdefault(subject, [])
        for id in versions:
            if schemas[id - 1] == text:
                return self.answer(200, {"id": id})
        level = compatibility.get(subject, "BACKWARD")
        if versions and level == "BACKWARD":
            latest = json.loads(schemas[versions[-1] - 1])
            if not readable(latest, schema):
                return self.answer(409, {
                    "error_code": 409,
                    "message": f"Schema being registered is incompatible with an earlier schema for subject \"{subject}\" (BACKWARD: it cannot read data written with version {len(versions)})",
                })
        if text in schemas:
            id = schemas.index(text) + 1
        else:
            schemas.append(text)
            id = len(schemas)
        versions.append(id)
        return self.answer(200, {"id": id})

    def do_GET(self):
        parts = self.path.strip("/").split("/")
        if len(parts) == 3 and parts[:2] == ["schemas", "ids"]:
            id = int(parts[2])
            if 1 <= id <= len(schemas):
                return self.answer(200, {"schema": schemas[id - 1]})
            return self.answer(404, {"error_code": 40403, "message": "Schema not found"})
        if parts == ["subjects"]:
            return self.answer(200, sorted(subjects))
        if len(parts) == 4 and parts[0] == "subjects" and parts[2:] == ["versions", "latest"]:
            versions = subjects.get(parts[1])
            if not versions:
                return self.answer(404, {"error_code": 40401, "message": "Subject not found"})
            return self.answer(200, {
                "subject": parts[1],
                "version": len(versions),
                "id": versions[-1],
                "schema": schemas[versions[-1] - 1],
            })
        return self.answer(404, {"error_code": 404, "message": "not found"})

    def do_PUT(self):
        parts = self.path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "config":
            level = self.body().get("compatibility", "BACKWARD")
            compatibility[parts[1]] = level
            return self.answer(200, {"compatibility": level})
        return self.answer(404, {"error_code": 404, "message": "not found"})

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(sys.argv[1], "w") as f:
        f.write(str(server.server_address[1]))
    server.serve_forever()
