"""jsonnetfile.json read as jsonnet-bundler reads it (spec/v0, spec/v1 and spec/v1/deps of its
source): the names a remote gets in vendor/, the remote git fetches, the legacy name, the
order and versions of repeated dependencies, the version 0 shape."""

from __future__ import annotations

import json

import pytest

from shared.engine.commodore.jsonnetfile import GitSource, parse
from shared.engine.errors import FleetError


def one(remote: str, subdir: str = "", version: int = 1) -> tuple[str, str, str]:
    entry = {"source": {"git": {"remote": remote, "subdir": subdir}}, "version": "main"}
    if version == 0:
        entry["name"] = "given"
    text = json.dumps({"version": version, "dependencies": [entry]})
    dep = parse(text, "jsonnetfile.json").dependencies[0]
    assert isinstance(dep.source, GitSource)
    return dep.name, dep.source_legacy_name, dep.source.remote


@pytest.mark.parametrize(
    ("remote", "subdir", "expected"),
    [
        (
            "https://github.com/grafana/jsonnet-libs.git",
            "ksonnet-util",
            (
                "github.com/grafana/jsonnet-libs/ksonnet-util",
                "ksonnet-util",
                "https://github.com/grafana/jsonnet-libs.git",
            ),
        ),
        (
            "https://github.com/bitnami-labs/kube-libsonnet",
            "",
            (
                "github.com/bitnami-labs/kube-libsonnet",
                "kube-libsonnet",
                "https://github.com/bitnami-labs/kube-libsonnet.git",
            ),
        ),
        (  # groups nest (GitLab)
            "https://gitlab.example.com/group/sub/repo.git",
            "",
            (
                "gitlab.example.com/group/sub/repo",
                "repo",
                "https://gitlab.example.com/group/sub/repo.git",
            ),
        ),
        (  # jb fetches https only
            "http://git.example.com/acme/lib",
            "",
            ("git.example.com/acme/lib", "lib", "https://git.example.com/acme/lib.git"),
        ),
        (
            "git@github.com:acme/lib.git",
            "jsonnet",
            ("github.com/acme/lib/jsonnet", "jsonnet", "ssh://git@github.com/acme/lib.git"),
        ),
        (
            "ssh://git@git.example.com/acme/sub/lib.git",
            "",
            ("git.example.com/acme/sub/lib", "lib", "ssh://git@git.example.com/acme/sub/lib.git"),
        ),
        (  # a trailing slash stays in the name, as jb keeps it; not in the legacy name
            "https://github.com/acme/lib.git",
            "/a/b/",
            ("github.com/acme/lib/a/b/", "b", "https://github.com/acme/lib.git"),
        ),
    ],
)
def test_remotes_get_jbs_names(remote: str, subdir: str, expected: tuple[str, str, str]) -> None:
    assert one(remote, subdir) == expected


def test_version_0_subdirs_are_cleaned() -> None:
    assert (
        one("https://github.com/acme/lib.git", "/a/b/", version=0)[0] == "github.com/acme/lib/a/b"
    )


def test_a_repeated_dependency_keeps_its_first_place_and_its_last_version() -> None:
    def dep(remote: str, version: str, name: str = "") -> dict[str, object]:
        return {"source": {"git": {"remote": remote}}, "version": version, "name": name}

    text = json.dumps(
        {
            "version": 1,
            "dependencies": [
                dep("https://github.com/acme/a.git", "v1"),
                dep("https://github.com/acme/b.git", "v1"),
                dep("ssh://git@github.com/acme/a.git", "v2", name="alpha"),
            ],
        }
    )
    deps = parse(text, "f").dependencies
    assert [(d.name, d.version, d.legacy_name) for d in deps] == [
        ("github.com/acme/a", "v2", "alpha"),
        ("github.com/acme/b", "v1", "b"),
    ]
    # version 0: keyed by name first, then by the package
    v0 = json.dumps(
        {
            "dependencies": [
                dep("https://github.com/acme/a.git", "v1", name="x"),
                dep("https://github.com/acme/b.git", "v1", name="x"),
                dep("https://github.com/acme/c.git", "v1", name="c"),
            ]
        }
    )
    assert [(d.name, d.legacy_name) for d in parse(v0, "f").dependencies] == [
        ("github.com/acme/b", "x"),
        ("github.com/acme/c", "c"),
    ]


def test_a_remote_never_shows_its_password() -> None:
    text = json.dumps(
        {
            "version": 1,
            "dependencies": [
                {"source": {"git": {"remote": "ftp://user:s3cret@host/x"}}, "version": "main"}
            ],
        }
    )
    with pytest.raises(FleetError) as caught:
        parse(text, "jsonnetfile.json")
    assert "s3cret" not in str(caught.value) and "ftp://user@host/x" in str(caught.value)
    # jb keeps host, path and repository only: credentials never reach git or a message
    remote = "https://user:s3cret@github.com/acme/lib.git"
    assert one(remote) == ("github.com/acme/lib", "lib", "https://github.com/acme/lib.git")
