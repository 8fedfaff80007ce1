"""A fake of the slice of Project Syn's Lieutenant API that Commodore (and the commodore layout)
uses, for the tests and the embedded stack, like the fake Argo CD beside it:

- `GET /clusters/<id>`, `GET /clusters?tenant=<id>`, `GET /tenants/<id>`: the clusters and
  tenants it was given, each checked against Lieutenant's own schemas (`Cluster`, `Tenant`) when
  added, so a fake answer Lieutenant could not give fails at once;
- `POST /clusters/<id>/compileMeta`: the body is validated against `ClusterCompileMeta`
  (Lieutenant answers 400 with `{"reason": …}` to a body it cannot read, and so does this fake),
  recorded, stored as the cluster's `compileMeta`, answered 204;
- bearer-token authentication: without the token, 401 `{"reason": "…"}`.

The schemas are `lieutenant_schemas.json` beside this file: `components.schemas` of
Lieutenant's OpenAPI description (tests/fixtures/lieutenant/openapi.yaml, vendored with its
licence), written by `python -m shared.devstack.lieutenant --extract-schemas <openapi.yaml>`.

Control endpoints (no auth; bind to loopback): `GET /_lieutenant/compile-meta` lists the
reported bodies (`[{"cluster": id, "body": {...}}]`).

Run standalone: `python -m shared.devstack.lieutenant --token t --data clusters.json`
(`{"clusters": {<id>: Cluster}, "tenants": {<id>: Tenant}}`).
"""

from __future__ import annotations

import argparse
import json
import threading
import urllib.parse
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from shared.devstack.background import BackgroundHTTPServer, FakeRequestHandler

SCHEMAS_FILE = Path(__file__).with_name("lieutenant_schemas.json")


class LieutenantSchemas:
    """Validators of Lieutenant's schemas (OpenAPI 3.0 schema objects, read as JSON Schema:
    their extra keywords such as `example` are annotations)."""

    def __init__(self, schemas: dict[str, Any]) -> None:
        self.schemas = schemas

    @classmethod
    def packaged(cls) -> LieutenantSchemas:
        return cls(json.loads(SCHEMAS_FILE.read_text()))

    def problems(self, name: str, body: Any) -> list[str]:
        """What is wrong with `body` as Lieutenant's `name` schema: `path: message` each."""
        schema = {"$ref": f"#/components/schemas/{name}", "components": {"schemas": self.schemas}}
        validator = jsonschema.Draft4Validator(schema)
        return [
            f"{'.'.join(str(p) for p in e.absolute_path) or '(body)'}: {e.message}"
            for e in sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
        ]


def extract_schemas(openapi: Path) -> dict[str, Any]:
    """`components.schemas` of Lieutenant's OpenAPI description."""
    schemas: dict[str, Any] = yaml.safe_load(openapi.read_text())["components"]["schemas"]
    return schemas


class LieutenantError(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.body = {"reason": reason}


class _Handler(FakeRequestHandler):
    def _serve(self, method: str) -> None:
        headers, raw = self.read_request()
        try:
            status, body = self.owner.answer(method, self.path, headers, raw)
        except LieutenantError as err:
            status, body = err.status, err.body
        data = b"" if body is None else json.dumps(body).encode()
        self.write_answer(status, "application/json", data)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")


class FakeLieutenant(BackgroundHTTPServer):
    handler = _Handler

    def __init__(
        self,
        *,
        token: str,
        clusters: dict[str, Any] | None = None,
        tenants: dict[str, Any] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__("fake lieutenant", host, port)
        self.token = token
        self.schemas = LieutenantSchemas.packaged()
        self._lock = threading.Lock()
        self.clusters: dict[str, dict[str, Any]] = {}
        self.tenants: dict[str, dict[str, Any]] = {}
        self.compile_meta: list[tuple[str, dict[str, Any]]] = []  # (cluster, body) as POSTed
        self.requests: list[str] = []  # "GET /clusters/c-one", in order
        self._failing: list[int] = []  # statuses the next compileMeta POSTs answer
        for body in (tenants or {}).values():
            self.add_tenant(body)
        for body in (clusters or {}).values():
            self.add_cluster(body)

    def add_cluster(self, body: dict[str, Any]) -> None:
        self._check("Cluster", body)
        with self._lock:
            self.clusters[str(body["id"])] = json.loads(json.dumps(body))

    def add_tenant(self, body: dict[str, Any]) -> None:
        self._check("Tenant", body)
        with self._lock:
            self.tenants[str(body["id"])] = json.loads(json.dumps(body))

    def _check(self, name: str, body: dict[str, Any]) -> None:
        problems = self.schemas.problems(name, body)
        if problems or "id" not in body:
            raise ValueError(f"not a Lieutenant {name}: {'; '.join(problems) or 'no id'}")

    def fail_reports(self, *statuses: int) -> None:
        """The next compileMeta POSTs answer these statuses (an outage), then all is well."""
        with self._lock:
            self._failing.extend(statuses)

    def reported(self) -> list[tuple[str, dict[str, Any]]]:
        with self._lock:
            return list(self.compile_meta)

    # --- the API ---------------------------------------------------------------------------

    def answer(
        self, method: str, target: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, Any]:
        parts = urllib.parse.urlsplit(target)
        path = parts.path.rstrip("/")
        with self._lock:
            self.requests.append(f"{method} {path}")
        if path == "/_lieutenant/compile-meta" and method == "GET":
            return 200, [{"cluster": c, "body": b} for c, b in self.reported()]
        if headers.get("authorization") != f"Bearer {self.token}":
            raise LieutenantError(401, "missing or malformed jwt")
        segments = path.strip("/").split("/")
        query = dict(urllib.parse.parse_qsl(parts.query))
        with self._lock:
            if method == "GET" and segments == ["clusters"]:
                tenant = query.get("tenant")
                found = [c for c in self.clusters.values() if not tenant or c["tenant"] == tenant]
                return 200, sorted(found, key=lambda c: str(c["id"]))
            if method == "GET" and len(segments) == 2 and segments[0] in ("clusters", "tenants"):
                table = self.clusters if segments[0] == "clusters" else self.tenants
                if segments[1] not in table:
                    raise LieutenantError(404, f"{segments[0][:-1]} {segments[1]} not found")
                return 200, table[segments[1]]
        if method == "POST" and len(segments) == 3 and segments[::2] == ["clusters", "compileMeta"]:
            return self._compile_meta(segments[1], headers, raw)
        raise LieutenantError(404, f"no route for {method} {path}")

    def _compile_meta(self, cluster: str, headers: dict[str, str], raw: bytes) -> tuple[int, Any]:
        if not headers.get("content-type", "").startswith("application/json"):
            raise LieutenantError(415, "expected application/json")
        try:
            body = json.loads(raw)
        except ValueError as err:
            raise LieutenantError(400, f"request body has an error: {err}") from None
        problems = self.schemas.problems("ClusterCompileMeta", body)
        if problems:
            raise LieutenantError(400, "request body has an error: " + "; ".join(problems))
        with self._lock:
            if self._failing:
                raise LieutenantError(self._failing.pop(0), "service unavailable")
            if cluster not in self.clusters:
                raise LieutenantError(404, f"cluster {cluster} not found")
            self.clusters[cluster]["compileMeta"] = body
            self.compile_meta.append((cluster, body))
        return 204, None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m shared.devstack.lieutenant", description="Run the fake Lieutenant API."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", help="the bearer token clients must send")
    parser.add_argument("--data", type=Path, help="JSON: {clusters: {...}, tenants: {...}}")
    parser.add_argument(
        "--extract-schemas",
        type=Path,
        metavar="OPENAPI_YAML",
        help=f"write {SCHEMAS_FILE.name} from Lieutenant's openapi.yaml and exit",
    )
    args = parser.parse_args(argv)
    if args.extract_schemas:
        schemas = extract_schemas(args.extract_schemas)
        SCHEMAS_FILE.write_text(json.dumps(schemas, indent=2, sort_keys=True) + "\n")
        return 0
    if not args.token:
        parser.error("--token is required")
    data = json.loads(args.data.read_text()) if args.data else {}
    fake = FakeLieutenant(
        token=args.token,
        clusters=data.get("clusters"),
        tenants=data.get("tenants"),
        host=args.host,
        port=args.port,
    )
    fake.start()
    print(json.dumps({"event": "fake lieutenant started", "url": fake.url}), flush=True)
    fake.serve_until_signalled()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
