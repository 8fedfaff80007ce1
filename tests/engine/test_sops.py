"""SOPS decryption with the real sops binary and throwaway age keys."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from shared.engine.secrets import sops
from shared.engine.secrets.sops import SopsError, decrypt_values, is_sops_file
from shared.engine.tree import GitTree, WorkTree
from tests.support.age import AgeKey, encrypt_yaml, generate_key, write_encrypted
from tests.support.gitrepo import commit_all, init_repo

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAq1w2Lk9x7PzJ0fQe1Xb8h3nY4vG2mT5sR6dU9wK0cZ1aB2eF\n"
    "3gH4iJ5kL6mN7oP8qR9sT0uV1wX2yZ3aB4cD5eF6gH7iJ8kL9mN0oP1qR2sT3u==\n"
    "-----END RSA PRIVATE KEY-----\n"
)

VALUES: dict[str, Any] = {
    "password": "s3cret!hunter2",
    "port": 5432,
    "big": 123456789012,
    "negative": -7,
    "ratio": 3.14159,
    "whole": 3.0,
    "enabled": True,
    "disabled": False,
    "nothing": None,
    "empty": "",
    "yes_string": "yes",
    "unicode": "pässwörd ✓ пароль",
    "multiline": "line one\nline two\n  indented three\n",
    "pem": PEM,
    "list": [1, "two", 3.5, False, {"k": "v"}, [None]],
    "map": {"nested": {"deep": "value-xyz"}, "empty_map": {}, "empty_list": []},
}


@pytest.fixture(autouse=True)
def isolated_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No key from the developer's machine may take part, and each test starts cold."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    for name in (
        "SOPS_AGE_KEY_FILE",
        "SOPS_AGE_KEY",
        "SOPS_AGE_KEY_CMD",
        "SOPS_AGE_SSH_PRIVATE_KEY_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    sops.clear_cache()


@pytest.fixture
def key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgeKey:
    made = generate_key(tmp_path / "keys")
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(made.key_file))
    return made


def secret_file(tmp_path: Path, key: AgeKey, values: Any = VALUES, rel: str = "x.sops.yaml") -> str:
    write_encrypted(tmp_path / "fleet" / rel, values, [key.recipient])
    return rel


def assert_same_types(got: Any, want: Any, path: str = "") -> None:
    assert type(got) is type(want), f"{path}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, dict):
        assert list(got) == list(want), path
        for k in want:
            assert_same_types(got[k], want[k], f"{path}/{k}")
    elif isinstance(want, list):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same_types(g, w, f"{path}/{i}")


def test_round_trip_keeps_every_type(tmp_path: Path, key: AgeKey) -> None:
    rel = secret_file(tmp_path, key)
    ciphertext = (tmp_path / "fleet" / rel).read_text()
    assert "hunter2" not in ciphertext and "value-xyz" not in ciphertext
    assert is_sops_file(ciphertext)

    got = decrypt_values(WorkTree(tmp_path / "fleet"), rel)

    assert got == VALUES
    assert_same_types(got, VALUES)  # 3.0 stays a float, "yes" stays a string
    assert got["multiline"] == "line one\nline two\n  indented three\n"
    assert got["pem"] == PEM


def test_key_in_sops_age_key_variable(
    tmp_path: Path, key: AgeKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    rel = secret_file(tmp_path, key, {"a": "b-value"})
    monkeypatch.delenv("SOPS_AGE_KEY_FILE")
    monkeypatch.setenv("SOPS_AGE_KEY", key.identity)
    assert decrypt_values(WorkTree(tmp_path / "fleet"), rel) == {"a": "b-value"}


def test_several_recipients_each_decrypt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ci = generate_key(tmp_path / "ci")
    dev = generate_key(tmp_path / "dev")
    path = tmp_path / "fleet" / "g.sops.yaml"
    write_encrypted(path, {"token": "tok-12345-abc"}, [ci.recipient, dev.recipient])
    for who in (ci, dev):
        sops.clear_cache()
        monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(who.key_file))
        assert decrypt_values(WorkTree(tmp_path / "fleet"), "g.sops.yaml")["token"] == (
            "tok-12345-abc"
        )


def test_missing_key_names_file_and_hides_values(
    tmp_path: Path, key: AgeKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    rel = secret_file(tmp_path, key, VALUES, "deployments/global.values.sops.yaml")
    monkeypatch.delenv("SOPS_AGE_KEY_FILE")
    with pytest.raises(SopsError) as caught:
        decrypt_values(WorkTree(tmp_path / "fleet"), rel)
    text = str(caught.value)
    assert text.startswith("deployments/global.values.sops.yaml: no age key can decrypt")
    assert "SOPS_AGE_KEY_FILE" in text
    assert key.recipient in text  # public: tells the operator which key is missing
    assert caught.value.path == rel and not caught.value.retryable
    assert_no_plaintext(text)


def test_wrong_key_says_it_is_not_a_recipient(
    tmp_path: Path, key: AgeKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    rel = secret_file(tmp_path, key)
    other = generate_key(tmp_path / "other")
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(other.key_file))
    with pytest.raises(SopsError, match=r"not one of the file's recipients") as caught:
        decrypt_values(WorkTree(tmp_path / "fleet"), rel)
    assert_no_plaintext(str(caught.value))
    assert other.identity not in str(caught.value) and key.identity not in str(caught.value)


def test_key_file_that_does_not_exist(
    tmp_path: Path, key: AgeKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    rel = secret_file(tmp_path, key)
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(tmp_path / "nope.txt"))
    with pytest.raises(SopsError, match=r"nope\.txt', which does not exist"):
        decrypt_values(WorkTree(tmp_path / "fleet"), rel)


def test_plain_yaml_is_refused_without_running_sops(tmp_path: Path, key: AgeKey) -> None:
    (tmp_path / "fleet").mkdir()
    (tmp_path / "fleet" / "plain.sops.yaml").write_text("password: not-encrypted-at-all\n")
    with pytest.raises(SopsError, match=r"^plain\.sops\.yaml: not a SOPS file") as caught:
        decrypt_values(WorkTree(tmp_path / "fleet"), "plain.sops.yaml")
    assert "not-encrypted-at-all" not in str(caught.value)
    assert sops.cache_info().runs == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: b\n", False),
        ("", False),
        ("- a\n- b\n", False),
        ("a: [\n", False),
        ("a: b\nsops: {}\n", False),
        ("a: b\nsops:\n  mac: x\n", False),
        ("a: b\nsops:\n  mac: ENC[x]\n  version: 3.11.0\n", True),
        ("a: b\nsops:\n  version: 3.11.0\n", True),  # a damaged one: sops says what is wrong
        ('{"a": "b", "sops": {"mac": "x", "lastmodified": "t"}}', True),
    ],
)
def test_is_sops_file(text: str, expected: bool) -> None:
    assert is_sops_file(text) is expected


def test_mac_mismatch_is_reported(tmp_path: Path, key: AgeKey) -> None:
    rel = secret_file(tmp_path, key, {"keep": "kept-value", "drop": "dropped-value"})
    path = tmp_path / "fleet" / rel
    # Removing an entry leaves every remaining value decryptable but breaks the file's MAC.
    path.write_text(
        "".join(line for line in path.read_text().splitlines(True) if "drop:" not in line)
    )
    with pytest.raises(SopsError, match=r"MAC mismatch") as caught:
        decrypt_values(WorkTree(tmp_path / "fleet"), rel)
    assert "kept-value" not in str(caught.value)


def test_a_missing_mac_is_named_as_sops_names_it(tmp_path: Path, key: AgeKey) -> None:
    """A file whose `sops.mac` line is gone is still a SOPS file: the message is sops' own
    ("MAC mismatch. File has no MAC") at the `sops:` line, not "not a SOPS file"."""
    rel = secret_file(tmp_path, key, {"keep": "kept-value"})
    path = tmp_path / "fleet" / rel
    lines = path.read_text().splitlines(True)
    path.write_text("".join(line for line in lines if not line.startswith("    mac: ")))
    sops_line = next(i for i, line in enumerate(lines, start=1) if line.startswith("sops:"))
    with pytest.raises(SopsError) as caught:
        decrypt_values(WorkTree(tmp_path / "fleet"), rel)
    assert str(caught.value).startswith(
        f"{rel}:{sops_line}: cannot decrypt: MAC mismatch. File has no MAC"
    )
    assert "kept-value" not in str(caught.value) and "not a SOPS file" not in str(caught.value)


def test_corrupt_ciphertext_is_reported(tmp_path: Path, key: AgeKey) -> None:
    rel = secret_file(tmp_path, key, {"a": "alpha-value", "b": "beta-value"})
    path = tmp_path / "fleet" / rel
    lines = path.read_text().splitlines(True)
    # Swap the two ciphertexts: each is bound to its key path, so decryption must fail.
    ia = next(i for i, line in enumerate(lines) if line.startswith("a: "))
    ib = next(i for i, line in enumerate(lines) if line.startswith("b: "))
    va, vb = lines[ia][3:], lines[ib][3:]
    lines[ia], lines[ib] = "a: " + vb, "b: " + va
    path.write_text("".join(lines))
    with pytest.raises(SopsError, match=r"^x\.sops\.yaml: cannot decrypt") as caught:
        decrypt_values(WorkTree(tmp_path / "fleet"), rel)
    assert_no_plaintext(str(caught.value), "alpha-value", "beta-value")
    assert "\n" not in str(caught.value)


def test_decrypts_once_per_content_and_key(
    tmp_path: Path, key: AgeKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    rel = secret_file(tmp_path, key, {"a": {"b": "one-value"}})
    tree = WorkTree(tmp_path / "fleet")
    first = decrypt_values(tree, rel)
    first["a"]["b"] = "mutated by a caller"
    second = decrypt_values(tree, rel)
    assert second == {"a": {"b": "one-value"}}  # callers get copies
    assert sops.cache_info().runs == 1 and sops.cache_info().hits == 1

    secret_file(tmp_path, key, {"a": {"b": "two-value"}})  # new content → new decryption
    assert decrypt_values(tree, rel) == {"a": {"b": "two-value"}}
    assert sops.cache_info().runs == 2

    # A different key set is a different cache entry: a revoked key must not keep working.
    other = generate_key(tmp_path / "other")
    monkeypatch.setenv("SOPS_AGE_KEY_FILE", str(other.key_file))
    with pytest.raises(SopsError):
        decrypt_values(tree, rel)
    assert sops.cache_info().runs == 3


def test_concurrent_callers_share_one_decryption(tmp_path: Path, key: AgeKey) -> None:
    rel = secret_file(tmp_path, key, {"a": "shared-value"})
    tree = WorkTree(tmp_path / "fleet")
    results: list[dict[str, Any]] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        results.append(decrypt_values(tree, rel))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [{"a": "shared-value"}] * 8
    assert sops.cache_info().runs == 1


def test_reads_git_revisions_without_checkout(tmp_path: Path, key: AgeKey) -> None:
    repo = init_repo(tmp_path / "repo")
    rel = "deployments/global.values.sops.yaml"
    write_encrypted(repo / rel, {"db": {"password": "first-pass"}}, [key.recipient])
    first = commit_all(repo, "first")
    write_encrypted(repo / rel, {"db": {"password": "second-pass"}}, [key.recipient])
    second = commit_all(repo, "second")
    (repo / rel).unlink()  # nothing on disk: only git objects

    assert decrypt_values(GitTree(repo, first), rel) == {"db": {"password": "first-pass"}}
    assert decrypt_values(GitTree(repo, second), rel) == {"db": {"password": "second-pass"}}
    with pytest.raises(SopsError, match="file not found"):
        decrypt_values(GitTree(repo, second), "deployments/missing.sops.yaml")


def test_broken_sops_config_in_cwd_does_not_matter(
    tmp_path: Path, key: AgeKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    rel = secret_file(tmp_path, key, {"a": "cfg-value"})
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / ".sops.yaml").write_text("creation_rules: [[[\n")
    monkeypatch.chdir(cwd)
    assert decrypt_values(WorkTree(tmp_path / "fleet"), rel) == {"a": "cfg-value"}


def test_slow_key_command_times_out(
    tmp_path: Path, key: AgeKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    rel = secret_file(tmp_path, key, {"a": "slow-value"})
    monkeypatch.delenv("SOPS_AGE_KEY_FILE")
    monkeypatch.setenv("SOPS_AGE_KEY_CMD", "sleep 3")
    monkeypatch.setattr(sops, "TIMEOUT_SECONDS", 0.5)
    with pytest.raises(SopsError, match=r"did not finish decrypting within 0.5s") as caught:
        decrypt_values(WorkTree(tmp_path / "fleet"), rel)
    assert caught.value.retryable


def test_encrypt_helper_produces_sops_metadata(key: AgeKey) -> None:
    text = encrypt_yaml("a: 1\n", [key.recipient])
    assert is_sops_file(text)
    assert sops.age_recipients(text) == [key.recipient]


def assert_no_plaintext(text: str, *extra: str) -> None:
    for value in ("s3cret!hunter2", "hunter2", "value-xyz", "pässwörd", "MIIEowIBAAKC", *extra):
        assert value not in text, f"plaintext {value!r} leaked into: {text}"
