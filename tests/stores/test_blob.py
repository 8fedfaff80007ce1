"""The BlobStore contract, held by both implementations: files on disk and S3 (a real SeaweedFS
server on 127.0.0.1, tests/support/seaweed.py)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from shared.settings import Settings
from shared.stores.blob import BlobStore, BlobStoreError, FileBlobStore
from shared.stores.blob_url import open_blob_store
from shared.stores.s3 import S3BlobStore, s3_client
from tests.support.seaweed import S3Server

_prefixes = itertools.count()


@pytest.fixture(scope="module")
def shared_bucket(s3_server: S3Server) -> str:
    return s3_server.new_bucket("contract")


@pytest.fixture(params=["file", "s3"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> BlobStore:
    if request.param == "file":
        return FileBlobStore(tmp_path / "blobs")
    server: S3Server = request.getfixturevalue("s3_server")
    bucket: str = request.getfixturevalue("shared_bucket")
    # one bucket for the module, a prefix of its own per test: the prefix is part of the
    # contract too (nothing outside it is seen, nothing of it leaks into keys)
    return S3BlobStore(server.client(), bucket, f"case-{next(_prefixes)}/nested")


def test_put_get_overwrite(store: BlobStore) -> None:
    assert store.get("deployments/acme/fleet/prod/latest.json") is None
    store.put("deployments/acme/fleet/prod/latest.json", b'{"v": 1}')
    assert store.get("deployments/acme/fleet/prod/latest.json") == b'{"v": 1}'
    store.put("deployments/acme/fleet/prod/latest.json", b'{"v": 2}')
    assert store.get("deployments/acme/fleet/prod/latest.json") == b'{"v": 2}'


def test_binary_and_empty_data(store: BlobStore) -> None:
    data = bytes(range(256)) * 1024 + b"\x00\r\n\xff"
    store.put("renders/a/b", data)
    assert store.get("renders/a/b") == data
    store.put("renders/empty", b"")
    assert store.get("renders/empty") == b""
    assert store.exists("renders/empty")


def test_exists_is_about_objects_not_folders(store: BlobStore) -> None:
    store.put("jobs/j-1/log", b"x")
    assert store.exists("jobs/j-1/log")
    assert not store.exists("jobs/j-1")
    assert not store.exists("jobs/j-2/log")
    assert store.get("jobs/j-1") is None


def test_delete_is_idempotent(store: BlobStore) -> None:
    store.put("a/b.txt", b"1")
    store.delete("a/b.txt")
    assert store.get("a/b.txt") is None
    assert not store.exists("a/b.txt")
    store.delete("a/b.txt")
    store.delete("never/there")
    assert list(store.list("a/")) == []


def test_list_prefix_semantics(store: BlobStore) -> None:
    keys = [
        "renders/acme/fleet/prod/eu/abc/digest.json",
        "renders/acme/fleet/prod/eu/abc/files/a.yaml",
        "renders/acme/fleet/prod/eu-2/abc/digest.json",
        "renders/acme/fleet/prod/eu.json",
        "renders/acme/fleet/prod/ü/x",
        "renders/acme/fleet/prod/Z",
        "deployments/acme/fleet/prod/eu/latest.json",
    ]
    for key in reversed(keys):
        store.put(key, key.encode())
    # a folder prefix: everything below it, sorted
    assert list(store.list("renders/acme/fleet/prod/eu/")) == [
        "renders/acme/fleet/prod/eu/abc/digest.json",
        "renders/acme/fleet/prod/eu/abc/files/a.yaml",
    ]
    # any other prefix is a plain string prefix of the key
    assert list(store.list("renders/acme/fleet/prod/eu")) == sorted(
        k for k in keys if k.startswith("renders/acme/fleet/prod/eu")
    )
    assert list(store.list("renders/acme/fleet/prod/eu-")) == [
        "renders/acme/fleet/prod/eu-2/abc/digest.json"
    ]
    # sorted by code point: upper case before lower case before non-ASCII
    assert list(store.list("renders/")) == sorted(k for k in keys if k.startswith("renders/"))
    assert next(store.list("renders/acme/fleet/prod/")) == "renders/acme/fleet/prod/Z"
    assert list(store.list("")) == sorted(keys)
    assert list(store.list("nothing/")) == []
    assert list(store.list("renders/acme/fleet/prod/e/")) == []
    # what list gives back can be read back
    for key in store.list("renders/"):
        assert store.get(key) == key.encode()


def test_list_pages_past_a_thousand_keys(store: BlobStore) -> None:
    """S3 answers at most 1000 keys per request: listing follows the continuation."""
    keys = [f"many/{i:05d}" for i in range(1203)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda k: store.put(k, b"."), keys))
    store.put("manz", b"outside")
    assert list(store.list("many/")) == keys
    assert list(store.list("man")) == [*keys, "manz"]


def test_append(store: BlobStore) -> None:
    store.append("jobs/j-1/log", b'{"line": 1}\n')
    store.append("jobs/j-1/log", b'{"line": 2}\n')
    assert store.get("jobs/j-1/log") == b'{"line": 1}\n{"line": 2}\n'
    store.put("jobs/j-1/log", b"reset\n")
    store.append("jobs/j-1/log", b"more\n")
    assert store.get("jobs/j-1/log") == b"reset\nmore\n"


@pytest.mark.parametrize("key", ["", "/abs", "a/../b", "..", "a//b", "/"])
def test_invalid_keys_are_refused(store: BlobStore, key: str) -> None:
    operations: list[Callable[[], object]] = [
        lambda: store.put(key, b"x"),
        lambda: store.get(key),
        lambda: store.exists(key),
        lambda: store.delete(key),
        lambda: store.append(key, b"x"),
    ]
    for operation in operations:
        with pytest.raises(ValueError, match="invalid blob key"):
            operation()


def test_concurrent_readers_see_old_or_new(store: BlobStore) -> None:
    old, new = b"o" * 300_000, b"n" * 300_000
    store.put("deployments/x/latest.json", old)
    seen: list[bytes | None] = []
    stop = threading.Event()
    # the writes start once every reader is reading (a busy machine may not schedule them)
    reading = threading.Barrier(4, timeout=30)

    def read() -> None:
        seen.append(store.get("deployments/x/latest.json"))
        reading.wait()
        while not stop.is_set():
            seen.append(store.get("deployments/x/latest.json"))

    readers = [threading.Thread(target=read) for _ in range(3)]
    for reader in readers:
        reader.start()
    reading.wait()
    try:
        for value in (new, old, new, old, new) * 3:
            store.put("deployments/x/latest.json", value)
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert seen
    assert {value for value in seen} <= {old, new}, "a reader saw a partial object"
    assert store.get("deployments/x/latest.json") == new


# --- S3 only ----------------------------------------------------------------------------------


def test_prefixes_keep_stores_apart(s3_server: S3Server) -> None:
    bucket = s3_server.new_bucket("prefixes")
    client = s3_server.client()
    whole, left, right = (
        S3BlobStore(client, bucket),
        S3BlobStore(client, bucket, "left/"),
        S3BlobStore(client, bucket, "/right"),
    )
    left.put("k", b"L")
    right.put("k", b"R")
    whole.put("k", b"W")
    assert (left.get("k"), right.get("k"), whole.get("k")) == (b"L", b"R", b"W")
    assert list(left.list("")) == ["k"]
    assert list(whole.list("")) == ["k", "left/k", "right/k"]
    left.delete("k")
    assert right.get("k") == b"R"
    with pytest.raises(ValueError, match="invalid blob key"):
        S3BlobStore(client, bucket, "a/../b")


def test_errors_name_the_operation_and_object(s3_server: S3Server) -> None:
    store = S3BlobStore(s3_server.client(), "no-such-bucket-here", "p")
    with pytest.raises(BlobStoreError, match=r"writing blob s3://no-such-bucket-here/p/a/b: "):
        store.put("a/b", b"x")
    with pytest.raises(BlobStoreError, match=r"listing blobs under s3://no-such-bucket-here/p/a"):
        list(store.list("a"))
    wrong = s3_client(s3_server.endpoint_url, s3_server.region, s3_server.access_key, "wrong")
    bucket = s3_server.new_bucket("errors")
    with pytest.raises(BlobStoreError, match=rf"reading blob s3://{bucket}/x") as caught:
        S3BlobStore(wrong, bucket).get("x")
    assert "wrong" not in str(caught.value)


def test_open_blob_store_from_urls_and_settings(
    s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for url in (f"file://{tmp_path}/a", str(tmp_path / "a")):
        opened = open_blob_store(url)
        assert isinstance(opened, FileBlobStore) and opened.root == tmp_path / "a"
    bucket = s3_server.new_bucket("open")
    settings = Settings(
        s3_endpoint_url=s3_server.endpoint_url,
        s3_region=s3_server.region,
        s3_access_key_id=s3_server.access_key,
        s3_secret_access_key=s3_server.secret_key,  # type: ignore[arg-type]
    )
    store = open_blob_store(f"s3://{bucket}/rollwright/blobs", settings)
    assert isinstance(store, S3BlobStore)
    store.put("jobs/j/log", b"hello")
    assert S3BlobStore(s3_server.client(), bucket).get("rollwright/blobs/jobs/j/log") == b"hello"
    with pytest.raises(ValueError, match="names a bucket"):
        open_blob_store("s3:///prefix", settings)
    with pytest.raises(ValueError, match="use a file:///path or an s3://bucket/prefix URL"):
        open_blob_store("gs://bucket/x", settings)


def test_unset_s3_settings_fall_back_to_the_aws_chain(
    s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ROLLWRIGHT_S3_* at all: endpoint and keys come from the standard AWS variables."""
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    bucket = s3_server.new_bucket("chain")
    settings = Settings()
    assert settings.s3_access_key_id is None and settings.s3_endpoint_url is None
    store = open_blob_store(f"s3://{bucket}", settings)
    store.put("k", b"via the chain")
    assert store.get("k") == b"via the chain"
    assert list(store.list("")) == ["k"]
