"""The secrets policy of plaintext publishers with the real sops, and the `publish` keys of
rollwright.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.engine.config.fleet import FleetConfig
from shared.engine.config.publish import target_path
from shared.engine.errors import FleetError
from shared.engine.publish_secrets import (
    PlaintextSecretsError,
    encrypted_regex,
    publishable_files,
    secret_files,
)
from shared.engine.render import Render
from shared.engine.tree import WorkTree
from shared.engine.validate import check_fleet
from tests.support.age import AgeKey
from tests.support.atlas import make_fleet
from tests.support.publish import documents, secret_fleet_files, sops_decrypt
from tests.support.secrets import assert_hidden

SECRET = "s3cr3t-value-of-some-length"
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  url: {}\n"
PLAIN_FILE = b"apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n"


def render_with(plain: bytes, shown: bytes) -> Render:
    files = {"cm.yaml": plain, "svc.yaml": PLAIN_FILE}
    return Render("r", files, {**files, "cm.yaml": shown})


def rules(tmp_path: Path, key: AgeKey) -> Path:
    (tmp_path / ".sops.yaml").write_text(f"creation_rules:\n  - age: {key.recipient}\n")
    return tmp_path


def test_only_files_redaction_changed_hold_secrets() -> None:
    render = render_with(CONFIGMAP.format(SECRET).encode(), CONFIGMAP.format("REDACTED").encode())
    assert secret_files(render) == {"cm.yaml": ["/0/data/url"]}
    with pytest.raises(PlaintextSecretsError) as info:
        publishable_files(
            render, "refuse", target="T", published_path=str, checkout=Path("/nonexistent")
        )
    assert info.value.paths == ["cm.yaml"]
    assert SECRET not in str(info.value)
    plain = Render.of("r", {"svc.yaml": PLAIN_FILE})
    assert publishable_files(plain, "refuse", target="T", published_path=str, checkout=Path())
    assert secret_files(plain) == {}


def test_encrypted_regex_per_document() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {}}
    assert encrypted_regex([secret], [secret]) == "^(data|stringData)$"
    real = [{"kind": "ConfigMap", "metadata": {"name": "c", "annotations": {"a": SECRET}}}]
    shown = [{"kind": "ConfigMap", "metadata": {"name": "c", "annotations": {"a": "REDACTED"}}}]
    assert encrypted_regex(real, shown) == "^(annotations)$"
    # a secret used as a key is never put in the regex (argv, the published sops metadata)
    assert SECRET not in encrypted_regex([{SECRET: {"a": "b"}}], [{"REDACTED": {"a": "b"}}])


def test_sops_encrypts_and_round_trips(tmp_path: Path, age_key: AgeKey) -> None:
    render = render_with(CONFIGMAP.format(SECRET).encode(), CONFIGMAP.format("REDACTED").encode())
    out = publishable_files(
        render,
        "sops",
        target="T",
        published_path=lambda p: "r/" + p,
        checkout=rules(tmp_path, age_key),
    )
    assert out["svc.yaml"] == PLAIN_FILE
    assert_hidden([("cm.yaml", out["cm.yaml"])], [SECRET])
    assert documents(sops_decrypt(out["cm.yaml"], age_key)) == documents(render.reveal()["cm.yaml"])


def test_a_secret_sops_cannot_hide_fails_instead_of_leaking(
    tmp_path: Path,
    age_key: AgeKey,
) -> None:
    """sops encrypts values, never keys: a secret used as a mapping key is refused."""
    plain = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  {SECRET}: x\n"
    shown = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  REDACTED: x\n"
    render = render_with(plain.encode(), shown.encode())
    with pytest.raises(FleetError) as info:
        publishable_files(
            render, "sops", target="T", published_path=str, checkout=rules(tmp_path, age_key)
        )
    message = str(info.value)
    assert message.startswith("cm.yaml: a secret value at /0/data/… would stay readable")
    assert "mapping keys" in message
    assert SECRET not in message


def test_sops_needs_the_fleets_sops_yaml(tmp_path: Path) -> None:
    render = render_with(CONFIGMAP.format(SECRET).encode(), CONFIGMAP.format("REDACTED").encode())
    with pytest.raises(FleetError) as info:
        publishable_files(render, "sops", target="T", published_path=str, checkout=tmp_path)
    assert info.value.path == ".sops.yaml"
    assert 'publishing root "r"' in str(info.value)


@pytest.mark.parametrize(
    ("publish", "line", "expected"),
    [
        ("  git:\n    path: clusters/\n", 3, "must contain {root}"),
        ("  git:\n    path: ../{root}\n", 3, "must not contain '.' or '..'"),
        ("  s3:\n    prefix: /{root}\n", 3, "must be a relative POSIX path"),
        ("  git:\n    repository: /srv/git/other.git\n", 3, "local paths are not"),
        ("  git:\n    repository: https://user:pw@host/x.git\n", 3, "expected `owner/name`"),
        ("  git:\n    branch: 'bad..branch'\n", 3, "not a valid branch name"),
        ("  target: s3\n", 1, "target s3 needs s3.bucket"),
        ("  catalog:\n    mode: merge\n", 3, "'commit' or 'pull-request'"),
        ("  catalog:\n    branch: 'a..b'\n", 3, "not a valid branch name"),
    ],
)
def test_publish_settings_errors_name_the_line(
    tmp_path: Path, publish: str, line: int, expected: str
) -> None:
    (tmp_path / "rollwright.yaml").write_text("publish:\n" + publish)
    with pytest.raises(FleetError) as info:
        FleetConfig.load(WorkTree(tmp_path))
    assert str(info.value).startswith(f"rollwright.yaml:{line}: ")
    assert expected in str(info.value)


def test_the_catalog_target_needs_the_commodore_layout(tmp_path: Path) -> None:
    (tmp_path / "rollwright.yaml").write_text("layout: atlas\npublish:\n  target: catalog\n")
    with pytest.raises(FleetError, match=r"publish\.target catalog needs layout: commodore"):
        FleetConfig.load(WorkTree(tmp_path))
    (tmp_path / "rollwright.yaml").write_text("layout: commodore\npublish:\n  target: catalog\n")
    assert FleetConfig.load(WorkTree(tmp_path)).publish.catalog.mode == "commit"


def test_target_path() -> None:
    assert target_path("{root}/", "prod/eu") == "prod/eu/"
    assert target_path("clusters/{root}/manifests", "a") == "clusters/a/manifests/"


@pytest.mark.parametrize(
    ("publish", "refused"),
    [
        ({"target": "git"}, True),
        ({"target": "s3", "secrets": "refuse", "s3": {"bucket": "b"}}, True),
        ({"target": "git", "secrets": "sops"}, False),
        ({"target": "blob"}, False),  # redacted: nothing to refuse
    ],
)
def test_validate_names_renders_publishing_would_refuse(
    tmp_path: Path, age_key: AgeKey, publish: dict[str, object], refused: bool
) -> None:
    """Secret values in a render and a target that would refuse them: a problem at
    rollwright.yaml's publish line, found by `validate`, not after someone approved."""
    make_fleet(tmp_path, secret_fleet_files(publish, age_key, SECRET), echo=True)
    problems = [str(p) for p in check_fleet(WorkTree(tmp_path)).problems]
    if not refused:
        assert problems == []
        return
    line = 3 if publish.get("secrets") else 2  # secrets:, else target:
    assert problems == [
        f"rollwright.yaml:{line}: 1 root(s) render secret values (g/c1); "
        f"`publish.target: {publish['target']}` would write them in plaintext and "
        "`publish.secrets` is `refuse` (the default), so publishing would fail after "
        "approval: set `publish.secrets: sops` to re-encrypt them for the recipients in "
        ".sops.yaml (docs/publishing.md)"
    ]
