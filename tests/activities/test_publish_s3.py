"""The S3 publisher on a real S3 server (SeaweedFS): generations under the root's prefix, one
pointer swapped last (a conditional write fenced by the ETag read first), old objects pruned
after; idempotent; abandoned attempts cannot swap back or prune; readers never see a mix; the
secrets policy applies as for git."""

from __future__ import annotations

import hashlib
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from botocore.exceptions import ClientError
from temporalio.exceptions import ApplicationError

from activities import publish as publish_activity
from activities.publish_s3 import (
    ERR_POINTER_MOVED,
    POINTER,
    S3Publisher,
    pointer_text,
    read_manifest,
)
from shared.contracts.deploy import ERR_FLEET
from shared.engine.render import Render, kubectl_binary
from tests.support.age import AgeKey
from tests.support.publish import (
    PublishWorld,
    documents,
    fleet_files,
    publish_world,
    secret_fleet_files,
)
from tests.support.seaweed import S3Server
from tests.support.secrets import assert_hidden

PASSWORD = "hunter2-is-not-a-good-password"


class RecordingClient:
    """The real boto3 client, recording the keys it writes and deletes, in order."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: list[tuple[str, str]] = []
        # the preconditions of each put, in order: {"IfMatch": etag} / {"IfNoneMatch": "*"}
        self.conditions: list[tuple[str, dict[str, str]]] = []
        self.lock = threading.Lock()

    def put_object(self, **kwargs: Any) -> Any:
        with self.lock:
            self.calls.append(("put", kwargs["Key"]))
            self.conditions.append(
                (kwargs["Key"], {k: v for k, v in kwargs.items() if k.startswith("If")})
            )
        return self.client.put_object(**kwargs)

    def delete_objects(self, **kwargs: Any) -> Any:
        with self.lock:
            self.calls.extend(("delete", o["Key"]) for o in kwargs["Delete"]["Objects"])
        return self.client.delete_objects(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


@pytest.fixture
def bucket(s3_server: S3Server) -> str:
    return s3_server.new_bucket("publish")


def s3_world(tmp_path: Path, s3_server: S3Server, bucket: str, **publish: Any) -> PublishWorld:
    settings = {"target": "s3", "s3": {"bucket": bucket}, **publish}
    client = RecordingClient(s3_server.client())
    return publish_world(tmp_path, fleet_files(settings), s3=S3Publisher(client))


def objects(client: Any, bucket: str, prefix: str = "") -> dict[str, bytes]:
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", ()):
            key = item["Key"]
            out[key] = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    return out


def kustomize(tree: dict[str, bytes], base: Path) -> list[Any]:
    """`kubectl kustomize` of the downloaded prefix: what Flux's kustomize-controller builds."""
    for key, data in tree.items():
        path = base / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    out = subprocess.run(
        [kubectl_binary(), "kustomize", str(base)], check=True, capture_output=True
    ).stdout
    return sorted(documents(out), key=lambda d: (d["kind"], d["metadata"]["name"]))


def render_docs(render: dict[str, bytes]) -> list[Any]:
    docs = [d for data in render.values() for d in documents(data)]
    return sorted(docs, key=lambda d: (d["kind"], d["metadata"]["name"]))


def test_publish_writes_a_generation_and_the_pointer(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    world = s3_world(tmp_path, s3_server, bucket)
    result = world.publish(world.request("g/c1", "dep-1"))
    assert result.target == f"s3://{bucket}/g/c1/"
    assert not result.already_published
    stored = objects(s3_server.client(), bucket)
    plain = world.plain("g/c1")
    assert set(stored) == {"g/c1/" + POINTER} | {f"g/c1/dep-1/{p}" for p in plain}
    assert all(stored[f"g/c1/dep-1/{p}"] == d for p, d in plain.items())
    manifest = read_manifest(stored["g/c1/" + POINTER])
    assert manifest is not None
    assert manifest["deployment_id"] == "dep-1"
    assert manifest["digest"] == Render.of("g/c1", plain).digest
    assert manifest["files"] == {p: hashlib.sha256(d).hexdigest() for p, d in plain.items()}
    # kustomize (Flux's reader) builds exactly the render from the prefix
    tree = {k[len("g/c1/") :]: v for k, v in stored.items()}
    assert kustomize(tree, tmp_path / "flux") == render_docs(plain)


def test_new_objects_first_then_the_pointer_then_the_prune(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    world = s3_world(tmp_path, s3_server, bucket)
    world.publish(world.request("g/c1", "dep-1"))
    world.publish(world.request("g/c2", "dep-9"))  # another root under the same bucket
    client = world.activities.targets.s3.client  # type: ignore[union-attr]
    client.calls.clear()
    world.commit({"deployments/g/c1/cluster.values.yaml": {"greeting": "bonjour"}})
    result = world.publish(world.request("g/c1", "dep-2"))
    assert not result.already_published
    kinds = [kind for kind, _ in client.calls]
    pointer = client.calls.index(("put", "g/c1/" + POINTER))
    assert all(k == "put" and key.startswith("g/c1/dep-2/") for k, key in client.calls[:pointer])
    assert kinds[pointer + 1 :] and set(kinds[pointer + 1 :]) == {"delete"}
    assert all(key.startswith("g/c1/dep-1/") for _, key in client.calls[pointer + 1 :])
    stored = objects(s3_server.client(), bucket)
    assert not [k for k in stored if k.startswith("g/c1/dep-1/")]
    assert [k for k in stored if k.startswith("g/c2/dep-9/")]  # the other root untouched
    # re-publishing the same deployment writes nothing
    client.calls.clear()
    again = world.publish(world.request("g/c1", "dep-2"))
    assert again.already_published
    assert client.calls == []


def test_a_retry_after_the_swap_still_prunes(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    world = s3_world(tmp_path, s3_server, bucket)
    world.publish(world.request("g/c1", "dep-1"))
    raw = s3_server.client()
    raw.put_object(Bucket=bucket, Key="g/c1/dep-0/left-over.yaml", Body=b"a: 1\n")
    again = world.publish(world.request("g/c1", "dep-1"))
    assert again.already_published
    assert "g/c1/dep-0/left-over.yaml" not in objects(raw, bucket)


def test_a_retry_after_the_swap_does_not_render_again(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    """The pointer names the deployment already: a retry is done before it renders, so a
    render that changed meanwhile cannot fail a deployment that was delivered."""
    world = s3_world(tmp_path, s3_server, bucket)
    world.publish(world.request("g/c1", "dep-1"))
    retry = world.publish(world.request("g/c1", "dep-1", digest="sha256:" + "0" * 64))
    assert retry.already_published and retry.target == f"s3://{bucket}/g/c1/"


def test_readers_see_one_whole_deployment_at_a_time(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    """A reader that follows the pointer while deployments are published gets a complete,
    unmixed generation, or (pruned under it) a missing object and then a newer pointer."""
    world = s3_world(tmp_path, s3_server, bucket)
    world.publish(world.request("g/c1", "dep-0"))
    reader = s3_server.client()
    stop = threading.Event()
    seen: list[str] = []
    problems: list[str] = []

    def read() -> None:
        while not stop.is_set():
            manifest = read_manifest(
                reader.get_object(Bucket=bucket, Key="g/c1/" + POINTER)["Body"].read()
            )
            assert manifest is not None
            generation = manifest["deployment_id"]
            try:
                for path, digest in manifest["files"].items():
                    key = f"g/c1/{generation}/{path}"
                    data = reader.get_object(Bucket=bucket, Key=key)["Body"].read()
                    if hashlib.sha256(data).hexdigest() != digest:
                        problems.append(f"{key} does not match its manifest")
            except reader.exceptions.NoSuchKey:
                newer = read_manifest(
                    reader.get_object(Bucket=bucket, Key="g/c1/" + POINTER)["Body"].read()
                )
                if newer is None or newer["deployment_id"] == generation:
                    problems.append(f"{generation}: an object went missing while still live")
                continue
            seen.append(generation)

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for n in range(1, 4):
            world.commit({"deployments/g/c1/cluster.values.yaml": {"greeting": f"hi {n}"}})
            world.publish(world.request("g/c1", f"dep-{n}"))
    finally:
        stop.set()
        thread.join()
    assert not problems
    assert seen and set(seen) <= {f"dep-{n}" for n in range(4)}


def test_secrets_policy_applies_to_s3(
    tmp_path: Path,
    s3_server: S3Server,
    bucket: str,
    age_key: AgeKey,
) -> None:
    settings = {"target": "s3", "s3": {"bucket": bucket, "prefix": "fleet/{root}"}}
    world = publish_world(
        tmp_path,
        secret_fleet_files(settings, age_key, PASSWORD),
        s3=S3Publisher(s3_server.client()),
    )
    with pytest.raises(ApplicationError) as info:
        world.publish(world.request("g/c1", "dep-1"))
    assert info.value.type == ERR_FLEET
    assert f'publishing root "g/c1" to s3://{bucket}/fleet/g/c1/' in info.value.message
    assert "publish.secrets: sops" in info.value.message
    assert_hidden([("message", info.value.message)], [PASSWORD])
    assert objects(s3_server.client(), bucket) == {}


def test_the_blob_store_is_not_a_target(tmp_path: Path, s3_server: S3Server, bucket: str) -> None:
    settings = {"target": "s3", "s3": {"bucket": bucket}}
    publisher = S3Publisher(s3_server.client(), reserved=(bucket, "state/"))
    world = publish_world(tmp_path, fleet_files(settings), s3=publisher)
    world.publish(world.request("g/c1", "dep-1"))  # g/c1/ does not overlap state/
    publisher.reserved = (bucket, "")
    with pytest.raises(ApplicationError) as info:
        world.publish(world.request("g/c1", "dep-2"))
    assert "rollwright's own blob store" in info.value.message


def test_kustomization_pointer_is_valid_yaml() -> None:
    text = pointer_text({"deployment_id": "d"}, ["a b.yaml", "x.txt"], "d/")
    doc = yaml.safe_load(text)
    assert doc["kind"] == "Kustomization"
    assert doc["resources"] == ["d/a b.yaml"]
    assert read_manifest(text) == {"deployment_id": "d"}


# --- fencing: the pointer is swapped only if nobody swapped it since this attempt read it ---

ROOT, PREFIX = "g/c1", "g/c1/"


def live(client: Any, bucket: str) -> dict[str, Any]:
    manifest = read_manifest(client.get_object(Bucket=bucket, Key=PREFIX + POINTER)["Body"].read())
    assert manifest is not None
    return manifest


def assert_live_generation_intact(client: Any, bucket: str, deployment: str) -> None:
    """The pointer names `deployment` and every file it lists is there, as published."""
    manifest = live(client, bucket)
    assert manifest["deployment_id"] == deployment
    stored = objects(client, bucket, PREFIX)
    for path, digest in manifest["files"].items():
        data = stored[f"{PREFIX}{deployment}/{path}"]
        assert hashlib.sha256(data).hexdigest() == digest


def published_once(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> tuple[PublishWorld, S3Publisher]:
    """A world whose root is live at deployment "dep-0", and its S3 publisher."""
    world = s3_world(tmp_path, s3_server, bucket)
    world.publish(world.request(ROOT, "dep-0"))
    publisher = world.activities.targets.s3  # type: ignore[union-attr]
    assert publisher is not None
    return world, publisher


def test_an_abandoned_attempt_cannot_swap_back_or_prune(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    """Deployment A's attempt stalls after writing its generation (timed out; the workflow
    moved on), deployment B publishes, then A wakes up: its swap is refused, B stays live."""
    world, publisher = published_once(tmp_path, s3_server, bucket)
    request_a = world.request(ROOT, "dep-a")
    files_a = world.plain(ROOT)
    seen = publisher.read_pointer(bucket, PREFIX, ROOT)
    assert seen.deployment_id == "dep-0" and seen.etag
    publisher.write_generation(bucket, PREFIX, files_a, request_a)
    # … A stalls here; B is deployed and published completely
    world.commit({"deployments/g/c1/cluster.values.yaml": {"greeting": "newer"}})
    request_b = world.request(ROOT, "dep-b")
    world.publish(request_b)
    raw = s3_server.client()
    after_b = objects(raw, bucket, PREFIX)
    with pytest.raises(ApplicationError) as info:
        publisher.swap(bucket, PREFIX, files_a, request_a, digest="sha256:a", seen=seen)
    assert info.value.type == ERR_POINTER_MOVED
    assert info.value.non_retryable
    assert info.value.message == (
        f'publishing root "g/c1" to s3://{bucket}/g/c1/: the pointer changed while this '
        f'deployment published (it now names deployment "dep-b", revision '
        f'"{request_b.revision}"); not overwriting it'
    )
    assert objects(raw, bucket, PREFIX) == after_b  # nothing written, nothing pruned
    assert_live_generation_intact(raw, bucket, "dep-b")
    assert not [k for k in after_b if k.startswith(PREFIX + "dep-a/")]  # B pruned A's leftovers
    # A's late prune (its retry found the pointer its own, then stalled) deletes nothing of B
    assert publisher.prune(bucket, PREFIX, request_a) == 0
    assert objects(raw, bucket, PREFIX) == after_b


def test_an_attempt_stalled_while_rendering_cannot_swap_over_a_newer_deployment(
    tmp_path: Path, s3_server: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fence is the pointer read before rendering: deployment A's attempt stalls in its
    render, B publishes completely meanwhile, A's swap is refused and B stays live."""
    world = s3_world(tmp_path, s3_server, bucket)
    world.publish(world.request(ROOT, "dep-0"))
    request_a = world.request(ROOT, "dep-a")
    world.commit({"deployments/g/c1/cluster.values.yaml": {"greeting": "newer"}})
    request_b = world.request(ROOT, "dep-b")
    render = publish_activity.publish_tree
    stalled: list[str] = []

    def render_with_a_stall(*args: Any, **kwargs: Any) -> Any:
        request = args[1]
        if request.deployment_id == "dep-a" and not stalled:
            stalled.append("dep-a")
            world.publish(request_b)  # … while A renders
        return render(*args, **kwargs)

    monkeypatch.setattr(publish_activity, "publish_tree", render_with_a_stall)
    with pytest.raises(ApplicationError) as info:
        world.publish(request_a)
    assert info.value.type == ERR_POINTER_MOVED and info.value.non_retryable
    assert '(it now names deployment "dep-b"' in info.value.message
    assert stalled == ["dep-a"]
    raw = s3_server.client()
    assert_live_generation_intact(raw, bucket, "dep-b")


def test_a_second_attempt_of_the_same_deployment_finishes_idempotently(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    """Two attempts of one deployment both read the old pointer and write the generation;
    the one that swaps second finds its own deployment live and reports it published."""
    world, publisher = published_once(tmp_path, s3_server, bucket)
    request = world.request(ROOT, "dep-1")
    files = world.plain(ROOT)
    first = publisher.read_pointer(bucket, PREFIX, ROOT)
    second = publisher.read_pointer(bucket, PREFIX, ROOT)
    publisher.write_generation(bucket, PREFIX, files, request)
    publisher.write_generation(bucket, PREFIX, files, request)
    done = publisher.swap(bucket, PREFIX, files, request, digest="sha256:1", seen=second)
    assert not done.already_published and done.fenced and done.pruned > 0
    late = publisher.swap(bucket, PREFIX, files, request, digest="sha256:1", seen=first)
    assert late.already_published
    raw = s3_server.client()
    assert_live_generation_intact(raw, bucket, "dep-1")
    assert set(objects(raw, bucket, PREFIX)) == {PREFIX + POINTER} | {
        f"{PREFIX}dep-1/{p}" for p in files
    }


def test_the_first_publish_creates_the_pointer_only_if_absent(
    tmp_path: Path, s3_server: S3Server, bucket: str
) -> None:
    """On an empty prefix the pointer is written with If-None-Match: *; of two first publishes
    racing, the later swap loses cleanly. Later swaps name the ETag they read."""
    world = s3_world(tmp_path, s3_server, bucket)
    publisher = world.activities.targets.s3  # type: ignore[union-attr]
    assert publisher is not None
    client = publisher.client
    files = world.plain(ROOT)
    request_x, request_y = world.request(ROOT, "dep-x"), world.request(ROOT, "dep-y")
    seen_x = publisher.read_pointer(bucket, PREFIX, ROOT)
    seen_y = publisher.read_pointer(bucket, PREFIX, ROOT)
    assert seen_x.etag is None and not seen_x.exists
    publisher.write_generation(bucket, PREFIX, files, request_x)
    publisher.write_generation(bucket, PREFIX, files, request_y)
    publisher.swap(bucket, PREFIX, files, request_x, digest="sha256:x", seen=seen_x)
    with pytest.raises(ApplicationError) as info:
        publisher.swap(bucket, PREFIX, files, request_y, digest="sha256:y", seen=seen_y)
    assert info.value.type == ERR_POINTER_MOVED and info.value.non_retryable
    assert 'it now names deployment "dep-x"' in info.value.message
    raw = s3_server.client()
    assert_live_generation_intact(raw, bucket, "dep-x")
    pointer_puts = [cond for key, cond in client.conditions if key == PREFIX + POINTER]
    assert pointer_puts == [{"IfNoneMatch": "*"}, {"IfNoneMatch": "*"}]
    # the next deployment swaps against the ETag it read: the pointer dep-x wrote
    etag = raw.head_object(Bucket=bucket, Key=PREFIX + POINTER)["ETag"]
    client.conditions.clear()
    result = world.publish(world.request(ROOT, "dep-z"))
    assert not result.already_published
    assert [c for k, c in client.conditions if k == PREFIX + POINTER] == [{"IfMatch": etag}]
    # dep-y's orphaned generation went with the prune of dep-z
    assert set(objects(raw, bucket, PREFIX)) == {PREFIX + POINTER} | {
        f"{PREFIX}dep-z/{p}" for p in files
    }


class NoConditionalWrites(RecordingClient):
    """Stands in for a store without conditional writes (older MinIO, some providers), which
    SeaweedFS is not: a conditional PutObject gets their 501 NotImplemented; every other
    request, and the unconditional retry, goes to the real server."""

    def put_object(self, **kwargs: Any) -> Any:
        if "IfMatch" in kwargs or "IfNoneMatch" in kwargs:
            raise ClientError(
                {
                    "Error": {
                        "Code": "NotImplemented",
                        "Message": "A header you provided implies functionality that is "
                        "not implemented",
                    },
                    "ResponseMetadata": {"HTTPStatusCode": 501},
                },
                "PutObject",
            )
        return super().put_object(**kwargs)


def test_a_store_without_conditional_writes_publishes_unfenced(
    tmp_path: Path, s3_server: S3Server, bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    publisher = S3Publisher(NoConditionalWrites(s3_server.client()))
    world = publish_world(
        tmp_path, fleet_files({"target": "s3", "s3": {"bucket": bucket}}), s3=publisher
    )
    files = world.plain(ROOT)
    request = world.request(ROOT, "dep-1")
    with caplog.at_level("WARNING"):
        outcome = publisher.publish_tree(bucket, PREFIX, files, request, digest="sha256:1")
    assert not outcome.fenced and not outcome.already_published
    assert_live_generation_intact(s3_server.client(), bucket, "dep-1")
    assert any("unfenced" in r.getMessage() for r in caplog.records)
