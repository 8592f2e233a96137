"""An Iceberg REST catalog for tests, on 127.0.0.1.

No REST catalog server is installable here (the reference one is a Java image), so this
serves the part of Apache Iceberg's REST catalog API (open-api/rest-catalog-open-api.yaml)
that a table writer uses — config, namespaces, tables: list, create, load, exists,
commit — over PyIceberg's SqlCatalog on a SQLite file, parsing requests and writing
responses with PyIceberg's own REST models, so a client sees what a real catalog
returns: a commit whose requirements fail is a 409, a missing table a 404.

usage: iceberg_rest_catalog.py PORT SQLITE_URI WAREHOUSE [--lose-commit-answers N]
           [--client ID:SECRET --token-uses N]

With --lose-commit-answers N the first N commits that add a snapshot are applied and
then answered with 503, as a gateway that lost the catalog's answer would.

With --client, every request needs a bearer token that the OAuth2 token endpoint
(POST /v1/oauth/tokens, client-credentials grant) issues for that client id and
secret; a token is good for --token-uses requests, then answered with 401, as a token
past its expiry would be. Each issued token is printed to stdout as "issued N", each
request served with a valid token as "served".
"""
import json
import sys
import threading
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

from pyiceberg.catalog.rest import (
    ConfigResponse,
    CreateTableRequest,
    ListNamespaceResponse,
    ListTableResponseEntry,
    ListTablesResponse,
    NamespaceResponse,
    TableResponse,
)
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.table import CommitTableRequest
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

port, uri, warehouse = int(sys.argv[1]), sys.argv[2], sys.argv[3]
lose = 0
if "--lose-commit-answers" in sys.argv:
    lose = int(sys.argv[sys.argv.index("--lose-commit-answers") + 1])
client = None
if "--client" in sys.argv:
    client = sys.argv[sys.argv.index("--client") + 1].split(":", 1)
token_uses = 10**9
if "--token-uses" in sys.argv:
    token_uses = int(sys.argv[sys.argv.index("--token-uses") + 1])
tokens = {}  # token -> requests left
issued = 0
catalog = SqlCatalog("rest", uri=uri, warehouse=warehouse)
lock = threading.Lock()

ERRORS = {
    NoSuchTableError: (404, "NoSuchTableException"),
    NoSuchNamespaceError: (404, "NoSuchNamespaceException"),
    TableAlreadyExistsError: (409, "AlreadyExistsException"),
    NamespaceAlreadyExistsError: (409, "AlreadyExistsException"),
    CommitFailedException: (409, "CommitFailedException"),
}


def namespace_of(part):
    # Levels of a namespace are separated by the unit separator (%1F) in paths.
    return tuple(unquote(part).split("\x1f"))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=None):
        # A HEAD answer has no body (bytes after it would be read as the next answer).
        data = b"" if body is None or self.command == "HEAD" else body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def error(self, status, kind, message):
        body = {"error": {"message": message, "type": kind, "code": status}}
        self.reply(status, json.dumps(body))

    def body(self):
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def issue_token(self):
        global issued
        form = parse_qs(self.body().decode())
        asked = [form.get("client_id", [""])[0], form.get("client_secret", [""])[0]]
        if form.get("grant_type") != ["client_credentials"] or asked != client:
            return self.error(401, "NotAuthorizedException", "unknown client credentials")
        issued += 1
        token = f"token-{issued}"
        tokens[token] = token_uses
        print(f"issued {issued}", flush=True)
        body = {"access_token": token, "token_type": "bearer", "expires_in": 3600,
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}
        return self.reply(200, json.dumps(body))

    def signed_in(self):
        header = self.headers.get("Authorization", "")
        token = header.removeprefix("Bearer ")
        if tokens.get(token, 0) <= 0:
            return False
        tokens[token] -= 1
        print("served", flush=True)
        return True

    def route(self, method):
        parts = [p for p in urlparse(self.path).path.split("/") if p]
        if parts[:1] != ["v1"]:
            return self.error(404, "NotFoundException", self.path)
        parts = parts[1:]
        try:
            with lock:
                if client is not None:
                    if parts == ["oauth", "tokens"] and method == "POST":
                        return self.issue_token()
                    if not self.signed_in():
                        return self.error(401, "NotAuthorizedException",
                                          "no valid bearer token (missing, unknown or expired)")
                return self.handle_parts(method, parts)
        except tuple(ERRORS) as e:
            status, kind = ERRORS[type(e)]
            return self.error(status, kind, str(e))
        except Exception as e:  # a bug here, or a request this subset does not take
            traceback.print_exc()
            return self.error(500, "ServerError", f"{type(e).__name__}: {e}")

    def handle_parts(self, method, parts):
        global lose
        if parts == ["config"] and method == "GET":
            return self.reply(200, ConfigResponse(defaults={}, overrides={}).model_dump_json())
        if parts == ["namespaces"]:
            if method == "GET":
                names = [tuple(n) for n in catalog.list_namespaces()]
                return self.reply(200, ListNamespaceResponse(namespaces=names).model_dump_json())
            if method == "POST":
                request = json.loads(self.body())
                namespace = tuple(request["namespace"])
                properties = request.get("properties") or {}
                catalog.create_namespace(namespace, properties)
                response = NamespaceResponse(namespace=namespace, properties=properties)
                return self.reply(200, response.model_dump_json())
        if len(parts) == 2 and parts[0] == "namespaces":
            namespace = namespace_of(parts[1])
            properties = catalog.load_namespace_properties(namespace)
            if method == "HEAD":
                return self.reply(204)
            response = NamespaceResponse(namespace=namespace, properties=properties)
            return self.reply(200, response.model_dump_json())
        if len(parts) == 3 and parts[0] == "namespaces" and parts[2] == "tables":
            namespace = namespace_of(parts[1])
            if method == "GET":
                entries = [
                    ListTableResponseEntry(namespace=namespace, name=ident[-1])
                    for ident in catalog.list_tables(namespace)
                ]
                return self.reply(200, ListTablesResponse(identifiers=entries).model_dump_json())
            if method == "POST":
                fields = json.loads(self.body())
                # Optional in the API; PyIceberg's model wants them present.
                for key in ("location", "partition-spec", "write-order"):
                    fields.setdefault(key, None)
                request = CreateTableRequest.model_validate(fields)
                table = catalog.create_table(
                    identifier=namespace + (request.name,),
                    schema=request.table_schema,
                    location=request.location,
                    partition_spec=request.partition_spec or UNPARTITIONED_PARTITION_SPEC,
                    sort_order=request.write_order or UNSORTED_SORT_ORDER,
                    properties=request.properties,
                )
                return self.reply(200, loaded(table))
        if len(parts) == 4 and parts[0] == "namespaces" and parts[2] == "tables":
            identifier = namespace_of(parts[1]) + (unquote(parts[3]),)
            table = catalog.load_table(identifier)
            if method == "HEAD":
                return self.reply(204)
            if method == "GET":
                return self.reply(200, loaded(table))
            if method == "POST":
                request = CommitTableRequest.model_validate_json(self.body())
                response = catalog.commit_table(table, request.requirements, request.updates)
                adds_snapshot = any(u.action == "add-snapshot" for u in request.updates)
                if adds_snapshot and lose > 0:
                    lose -= 1
                    return self.error(503, "ServiceUnavailableException", "the answer was lost")
                return self.reply(200, response.model_dump_json())
        return self.error(404, "NotFoundException", f"{method} {self.path}")

    def do_GET(self):
        self.route("GET")

    def do_HEAD(self):
        self.route("HEAD")

    def do_POST(self):
        self.route("POST")


def loaded(table):
    response = TableResponse(
        metadata_location=table.metadata_location, metadata=table.metadata, config={}
    )
    return response.model_dump_json()


server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
print(f"listening on 127.0.0.1:{port}", flush=True)
server.serve_forever()
