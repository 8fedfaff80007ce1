"""The production shape, checked without Docker (it cannot run on this machine): the structure
and wiring of docker-compose.yml, the Dockerfile, the Temporal setup script against a real dev
server, the PostgreSQL init script against a real PostgreSQL, the GitHub App manifest, and the
configuration docs against the settings model."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from shared.contracts.deploy import SEARCH_ATTRIBUTES, TASK_QUEUE, DeploymentRecord
from shared.devstack.ports import free_port
from shared.devstack.temporal import temporal_binary
from shared.engine.charts import remote as charts_remote
from shared.engine.commodore import repos as commodore_repos
from shared.settings import Settings
from shared.stores.blob_url import open_blob_store
from shared.stores.sql.deliveries import DeliveryStore
from shared.stores.sql.deployments import DeploymentStore
from shared.stores.sql.engine import Database
from tests.support.paths import REPO_ROOT
from tests.support.postgres import postgres_server
from tests.support.seaweed import seaweed_server

COMPOSE = REPO_ROOT / "docker-compose.yml"
DOCKERFILE = REPO_ROOT / "deploy" / "Dockerfile"
SETUP = REPO_ROOT / "deploy" / "temporal" / "setup.sh"
ENV_EXAMPLE = REPO_ROOT / "deploy" / "compose.env.example"

# What an operator fills into .env (deploy/compose.env.example lists the same names).
FILLED = {
    "ROLLWRIGHT_GITHUB_APP_ID": "123456",
    "ROLLWRIGHT_WEBHOOK_SECRET": "whsec-0123456789abcdef",
    "ROLLWRIGHT_API_TOKEN": "api-0123456789abcdef",
    "ROLLWRIGHT_GITHUB_OAUTH_CLIENT_ID": "Iv23li0123456789",
    "ROLLWRIGHT_GITHUB_OAUTH_CLIENT_SECRET": "oauth-0123456789abcdef",
    "TEMPORAL_DB_PASSWORD": "temporal-pw",
    "ROLLWRIGHT_DB_PASSWORD": "rollwright-pw",
    "S3_SECRET_KEY": "s3-secret",
}

_VAR = re.compile(r"\$(?:\$|\{(?P<name>\w+)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}|(?P<bare>\w+))")


class MissingVariable(KeyError):
    pass


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose's variable substitution: ${X}, ${X:-default}, ${X-default}, ${X:?err}, $$."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group("name") or match.group("bare")
        op, arg = match.group("op"), match.group("arg") or ""
        value = env.get(name)
        if op in (":-", ":?") and value == "":
            value = None
        if value is not None:
            return value
        if op in (":-", "-"):
            return arg
        if op in (":?", "?"):
            raise MissingVariable(f"{name}: {arg}")
        return ""

    return _VAR.sub(replace, text)


def load_compose(env: Mapping[str, str] = FILLED) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(interpolate(COMPOSE.read_text(), env))
    return data


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load_compose()


def service(compose: dict[str, Any], name: str) -> dict[str, Any]:
    assert name in compose["services"], f"no service {name}"
    found: dict[str, Any] = compose["services"][name]
    return found


def test_required_secrets_must_be_set() -> None:
    """Without a filled .env, compose refuses to start (and says which variable is missing)."""
    for name in FILLED:
        env = {k: v for k, v in FILLED.items() if k != name}
        with pytest.raises(MissingVariable, match=name):
            load_compose(env)
    # the example .env names every one of them
    example = ENV_EXAMPLE.read_text()
    for name in FILLED:
        assert re.search(rf"^{name}=", example, re.M), f"{name} missing from {ENV_EXAMPLE}"


def test_services_and_images(compose: dict[str, Any]) -> None:
    expected = {
        "postgres",
        "temporal-schema",
        "temporal",
        "temporal-setup",
        "temporal-ui",
        "seaweedfs",
        "s3-bucket",
        "gateway",
        "worker",
    }
    assert set(compose["services"]) == expected
    for name, spec in compose["services"].items():
        image = spec.get("image", "")
        assert ":" in image, f"{name}: image {image!r} has no pinned tag"
        assert not image.endswith(":latest"), f"{name}: pin a version, not latest"
    for name in ("gateway", "worker"):
        build = service(compose, name)["build"]
        assert (REPO_ROOT / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE
    assert service(compose, "gateway")["command"][:3] == ["python", "-m", "gateway"]
    assert service(compose, "worker")["command"] == ["python", "-m", "worker"]
    assert service(compose, "temporal")["image"].startswith("temporalio/server:")
    assert service(compose, "temporal-ui")["image"].startswith("temporalio/ui:")


def test_dependencies_have_what_their_conditions_need(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, spec in services.items():
        for dep, cond in (spec.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on unknown service {dep}"
            condition = cond["condition"]
            if condition == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits for {dep}'s health"
            elif condition == "service_completed_successfully":
                one_shot = services[dep]
                assert str(one_shot.get("restart", "")).startswith("on-failure"), dep
                assert "ports" not in one_shot, f"one-shot {dep} publishes ports"
            else:
                pytest.fail(f"{name}: unexpected condition {condition} on {dep}")
    # nothing of rollwright starts before Temporal knows its search attributes
    for name in ("gateway", "worker"):
        deps = services[name]["depends_on"]
        assert deps["temporal-setup"]["condition"] == "service_completed_successfully"
        assert deps["postgres"]["condition"] == "service_healthy"
    # no dependency cycle
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"dependency cycle {' → '.join((*path, name))}"
        for dep in services[name].get("depends_on") or {}:
            visit(dep, (*path, name))
        if name not in order:
            order.append(name)

    for name in services:
        visit(name, ())
    assert order.index("temporal-schema") < order.index("temporal") < order.index("worker")


def test_healthchecks(compose: dict[str, Any]) -> None:
    for name in ("postgres", "temporal", "temporal-ui", "seaweedfs", "gateway"):
        check = service(compose, name)["healthcheck"]
        assert check["test"][0] in ("CMD", "CMD-SHELL"), name
        assert check["retries"] >= 3 and "interval" in check, name
    gateway_check = " ".join(service(compose, "gateway")["healthcheck"]["test"])
    assert "http://127.0.0.1:8000/healthz" in gateway_check
    # the gateway health check uses what the image has: python, no curl
    assert service(compose, "gateway")["healthcheck"]["test"][1] == "python"


def _env(compose: dict[str, Any], name: str) -> dict[str, str]:
    env = service(compose, name)["environment"]
    assert isinstance(env, dict)
    return {k: str(v) for k, v in env.items()}


def test_rollwright_environment_is_wired_to_the_services(compose: dict[str, Any]) -> None:
    fields = {f"ROLLWRIGHT_{name.upper()}" for name in Settings.model_fields}
    for name in ("gateway", "worker"):
        env = _env(compose, name)
        unknown = {k for k in env if k.startswith("ROLLWRIGHT_")} - fields
        assert not unknown, f"{name}: variables no setting reads: {unknown}"
        # Temporal: the temporal service's gRPC port
        host, _, port = env["ROLLWRIGHT_TEMPORAL_ADDRESS"].partition(":")
        assert host == "temporal" and port == "7233"
        assert "7233:7233" in " ".join(service(compose, "temporal")["ports"])
        # SQL: the rollwright database of the postgres service, with the psycopg driver
        db = urlsplit(env["ROLLWRIGHT_DATABASE_URL"])
        assert db.scheme == "postgresql+psycopg"
        assert db.hostname == "postgres" and db.path == "/rollwright"
        assert db.username == "rollwright" and db.password == FILLED["ROLLWRIGHT_DB_PASSWORD"]
        # blobs: the bucket the s3-bucket job creates, on the seaweedfs service's S3 port,
        # with the key pair its identities config accepts
        blobs = urlsplit(env["ROLLWRIGHT_BLOB_URL"])
        assert blobs.scheme == "s3" and blobs.path.strip("/")
        assert f"-name {blobs.hostname}" in " ".join(service(compose, "s3-bucket")["command"])
        s3 = urlsplit(env["ROLLWRIGHT_S3_ENDPOINT_URL"])
        assert s3.hostname == "seaweedfs" and f"-s3.port={s3.port}" in " ".join(
            service(compose, "seaweedfs")["command"]
        )
        identity = json.loads(compose["configs"]["seaweedfs-s3"]["content"])["identities"][0]
        assert identity["credentials"][0] == {
            "accessKey": env["ROLLWRIGHT_S3_ACCESS_KEY_ID"],
            "secretKey": env["ROLLWRIGHT_S3_SECRET_ACCESS_KEY"],
        }
        assert {"Read", "Write", "List"} <= set(identity["actions"])
        # nothing of rollwright's state on a container volume
        assert not service(compose, name).get("volumes"), f"{name} mounts a volume"
        assert env["ROLLWRIGHT_GITHUB_APP_ID"] == FILLED["ROLLWRIGHT_GITHUB_APP_ID"]
    gateway = _env(compose, "gateway")
    assert gateway["ROLLWRIGHT_WEBHOOK_SECRET"] == FILLED["ROLLWRIGHT_WEBHOOK_SECRET"]
    assert gateway["ROLLWRIGHT_API_TOKEN"] == FILLED["ROLLWRIGHT_API_TOKEN"]
    # the App's private key, as a compose secret: the worker's, and the gateway's (it asks
    # through the App who may read the pages, for people signed in with the App's OAuth)
    assert (
        gateway["ROLLWRIGHT_GITHUB_OAUTH_CLIENT_ID"] == FILLED["ROLLWRIGHT_GITHUB_OAUTH_CLIENT_ID"]
    )
    for name in ("worker", "gateway"):
        secret = service(compose, name)["secrets"][0]
        assert _env(compose, name)["ROLLWRIGHT_GITHUB_PRIVATE_KEY_FILE"] == f"/run/secrets/{secret}"
        assert secret in compose["secrets"]
    # the UI and the check-run links agree on where the UI is
    assert gateway["ROLLWRIGHT_TEMPORAL_UI_URL"].endswith(":8080")
    assert "127.0.0.1:8080:8080" in service(compose, "temporal-ui")["ports"]


def test_compose_environment_makes_valid_settings(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    key = tmp_path / "app.pem"
    key.write_text("-----BEGIN RSA PRIVATE KEY-----\nx\n-----END RSA PRIVATE KEY-----\n")
    for name in ("gateway", "worker"):
        for var in list(os.environ):
            if var.startswith("ROLLWRIGHT_"):
                monkeypatch.delenv(var)
        for var, value in _env(compose, name).items():
            monkeypatch.setenv(var, value)
        monkeypatch.setenv("ROLLWRIGHT_GITHUB_PRIVATE_KEY_FILE", str(key))
        settings = Settings()
        assert settings.database.startswith("postgresql+psycopg://rollwright:")
        assert settings.blobs == "s3://rollwright/blobs"
        assert settings.s3_endpoint_url == "http://seaweedfs:8333"
        assert settings.s3_secret_access_key is not None
        assert settings.s3_secret_access_key.get_secret_value() == FILLED["S3_SECRET_KEY"]
        assert settings.temporal_address == "temporal:7233"
        assert settings.task_queue == TASK_QUEUE
        assert settings.github_configured
        assert settings.signin_configured is (name == "gateway")


def test_mounted_files_exist_and_scripts_are_sh(compose: dict[str, Any]) -> None:
    for name, spec in compose["services"].items():
        for mount in spec.get("volumes") or []:
            source = mount.split(":", 1)[0]
            if source.startswith("./"):
                assert (REPO_ROOT / source).exists(), f"{name} mounts missing {source}"
    for script in (REPO_ROOT / "deploy" / "temporal").glob("*.sh"):
        proc = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}: {proc.stderr}"
    dynamic = service(compose, "temporal")["environment"]["DYNAMIC_CONFIG_FILE_PATH"]
    config = REPO_ROOT / "deploy" / "temporal" / "dynamicconfig" / Path(dynamic).name
    values = yaml.safe_load(config.read_text())
    for key, entries in values.items():
        assert isinstance(entries, list) and all("value" in e for e in entries), key
    s3 = json.loads(compose["configs"]["seaweedfs-s3"]["content"])
    assert s3["identities"][0]["credentials"][0]["secretKey"] == FILLED["S3_SECRET_KEY"]


def test_dockerfile() -> None:
    text = DOCKERFILE.read_text()
    instructions = [
        line.split(None, 1)
        for line in text.replace("\\\n", " ").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert instructions[0] == ["FROM", "python:3.11-slim"]
    users = [arg for op, arg in instructions if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    runs = " ".join(arg for op, arg in instructions if op == "RUN")
    assert re.search(r"pip install '?\.(\[postgres\])?'?", runs)
    assert "git" in runs  # the worker's mirrors need git
    copied = {arg.split()[0] for op, arg in instructions if op == "COPY"}
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    include = re.search(r"include = \[(.*?)\]", pyproject)
    assert include is not None
    for package in re.findall(r'"(\w+)\*"', include.group(1)):
        assert package in copied, f"the image leaves out the {package} package"
    cmd = json.loads(next(arg for op, arg in instructions if op == "CMD"))
    assert cmd[:3] == ["python", "-m", "gateway"]
    ignore = (REPO_ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignore and ".git" in ignore


def test_setup_script_names_every_search_attribute() -> None:
    listed = re.search(r'ATTRIBUTES="([^"]+)"', SETUP.read_text())
    assert listed is not None
    assert tuple(listed.group(1).split()) == SEARCH_ATTRIBUTES


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_setup_script_against_a_real_temporal(tmp_path: Path) -> None:
    """deploy/temporal/setup.sh creates the namespace and registers the attributes as Keyword,
    and a second run changes nothing (the admin-tools image has the same `temporal` CLI)."""

    binary = temporal_binary()
    port = free_port()
    server = subprocess.Popen(
        [
            *(str(binary), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port)),
            *("--headless", "--log-level", "error"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    env = {
        **os.environ,
        "PATH": f"{binary.parent}{os.pathsep}{os.environ['PATH']}",
        "TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
        "NAMESPACE": "fleet-ops",
        "RETENTION": "7d",
    }
    try:
        first = subprocess.run(["sh", str(SETUP)], env=env, capture_output=True, text=True)
        assert first.returncode == 0, first.stderr
        assert "namespace fleet-ops created" in first.stdout
        listing = subprocess.run(
            [
                *(str(binary), "operator", "search-attribute", "list", "-n", "fleet-ops"),
                *("--address", env["TEMPORAL_ADDRESS"], "-o", "json"),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        custom = json.loads(listing)["customAttributes"]
        for name in SEARCH_ATTRIBUTES:
            assert custom.get(name) == "INDEXED_VALUE_TYPE_KEYWORD", (name, custom)
        again = subprocess.run(["sh", str(SETUP)], env=env, capture_output=True, text=True)
        assert again.returncode == 0, again.stderr
        assert again.stdout.count("already registered") == len(SEARCH_ATTRIBUTES)
        assert "created" not in again.stdout
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture
def postgres() -> Iterator[tuple[str, int]]:
    with postgres_server(user="temporal") as server:
        yield server.data_dir, server.port


@pytest.mark.timeout(120)
def test_postgres_init_script_and_sql_store(
    compose: dict[str, Any], postgres: tuple[str, int]
) -> None:
    """deploy/compose/postgres-init.sh makes the role and database that the compose
    ROLLWRIGHT_DATABASE_URL names, and the SQL store works there with the psycopg driver."""

    socket_dir, port = postgres
    env = {
        **os.environ,
        "POSTGRES_USER": "temporal",
        "ROLLWRIGHT_DB_PASSWORD": FILLED["ROLLWRIGHT_DB_PASSWORD"],
        "PGHOST": socket_dir,
        "PGPORT": str(port),
    }
    script = REPO_ROOT / "deploy" / "compose" / "postgres-init.sh"
    proc = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    compose_url = urlsplit(_env(compose, "worker")["ROLLWRIGHT_DATABASE_URL"])
    url = compose_url._replace(netloc=compose_url.netloc.replace("@postgres:5432", "@"))
    local = url.geturl().replace("@/", f"@127.0.0.1:{port}/")
    database = Database(local)
    deployments, deliveries = DeploymentStore(database), DeliveryStore(database)
    try:
        record = DeploymentRecord(
            deployment_id="d-compose",
            repo="acme/fleet",
            root="prod/eu-1",
            revision="a" * 40,
            trigger="merge",
            state="published",
            at=datetime.now(UTC),
        )
        deployments.record(record)
        assert deliveries.claim_one("g-1", "push", None, "acme/fleet") is True
        assert deliveries.claim_one("g-1", "push", None, "acme/fleet") is False
        rows = deployments.in_repo("acme/fleet", "prod/eu-1")
        assert [(r.deployment_id, r.state) for r in rows] == [("d-compose", "published")]
    finally:
        database.close()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_compose_blob_store_on_a_real_seaweedfs(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SeaweedFS with the compose file's identities config, the bucket its s3-bucket job
    creates, and the worker's ROLLWRIGHT_* variables (endpoint moved to the test server):
    the settings open a blob store that writes, lists and reads there."""

    env = _env(compose, "worker")
    s3_config = compose["configs"]["seaweedfs-s3"]["content"]
    with seaweed_server(
        env["ROLLWRIGHT_S3_ACCESS_KEY_ID"], env["ROLLWRIGHT_S3_SECRET_ACCESS_KEY"], s3_config
    ) as server:
        bucket = urlsplit(env["ROLLWRIGHT_BLOB_URL"]).hostname
        server.client().create_bucket(Bucket=bucket)
        for var in list(os.environ):
            if var.startswith(("ROLLWRIGHT_", "AWS_")):
                monkeypatch.delenv(var)
        for var, value in env.items():
            monkeypatch.setenv(var, value)
        monkeypatch.setenv("ROLLWRIGHT_S3_ENDPOINT_URL", server.endpoint_url)
        monkeypatch.setenv("ROLLWRIGHT_GITHUB_PRIVATE_KEY_FILE", "/nonexistent")
        settings = Settings()
        store = open_blob_store(settings.blobs, settings)
        store.put("jobs/d-1/log", b'{"msg": "hello"}\n')
        store.append("jobs/d-1/log", b'{"msg": "again"}\n')
        assert list(store.list("jobs/")) == ["jobs/d-1/log"]
        assert store.get("jobs/d-1/log") == b'{"msg": "hello"}\n{"msg": "again"}\n'
        # under the URL's prefix in the bucket the s3-bucket job makes
        prefix = urlsplit(env["ROLLWRIGHT_BLOB_URL"]).path.strip("/")
        raw = server.client().get_object(Bucket=bucket, Key=f"{prefix}/jobs/d-1/log")
        assert raw["Body"].read().startswith(b'{"msg": "hello"}')


def test_github_app_manifest() -> None:
    manifest = json.loads((REPO_ROOT / "deploy" / "github-app-manifest.json").read_text())
    assert manifest["default_permissions"] == {
        "checks": "write",
        "contents": "write",
        "pull_requests": "write",
        "metadata": "read",
        "members": "read",  # team approvers in review policies (docs/governance.md)
        "statuses": "read",  # a hotfix's pull request must have green statuses
    }
    assert set(manifest["default_events"]) == {
        "push",
        "pull_request",
        "check_run",
        "check_suite",
        "issue_comment",  # `/rollwright hotfix` commands (docs/governance.md)
    }
    assert manifest["hook_attributes"]["url"].endswith("/events")
    assert manifest["public"] is False


# Read by the render engine itself (it knows no Settings): the remote charts' cache and the
# commodore layout's git mirrors.
ENGINE_VARIABLES = {
    charts_remote.CACHE_ENV,
    commodore_repos.CACHE_ENV,
    commodore_repos.FETCH_TTL_ENV,
}


def test_configuration_doc_lists_every_setting() -> None:
    doc = (REPO_ROOT / "docs" / "configuration.md").read_text()
    for name in Settings.model_fields:
        assert f"`ROLLWRIGHT_{name.upper()}`" in doc, f"ROLLWRIGHT_{name.upper()} undocumented"
    for name in ENGINE_VARIABLES:
        assert f"`{name}`" in doc, f"{name} undocumented"
    documented = set(re.findall(r"`(ROLLWRIGHT_[A-Z_]+)`", doc))
    fields = {f"ROLLWRIGHT_{name.upper()}" for name in Settings.model_fields} | ENGINE_VARIABLES
    assert documented <= fields, f"documented but not read: {documented - fields}"


def test_operations_doc_names_attributes_and_queues() -> None:
    doc = (REPO_ROOT / "docs" / "operations.md").read_text()
    for name in SEARCH_ATTRIBUTES:
        assert f"`{name}`" in doc
    assert f"`{TASK_QUEUE}`" in doc
