"""A small dimensions-layout fleet for tests, as a dict of files to tweak per test."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shared.engine.config.fleet import FleetConfig
from shared.engine.dimensions.layout import DimensionsLayout
from shared.engine.helm.engine import render_chart
from shared.engine.tree import WorkTree
from tests.support.files import write_files

CONFIG: dict[str, Any] = {
    "dimensions": ["environments", "sectors", "regions"],
    "sequence": {
        "environments": [
            {
                "name": "e1",
                "sectors": [
                    {"name": "s1", "regions": [{"name": "r1"}, {"name": "r2"}]},
                    {"name": "s2", "regions": [{"name": "r1"}]},
                ],
            },
            {
                "name": "e2",
                "promotion": "manual",
                "sectors": [{"name": "s3", "regions": [{"name": "r3"}]}],
            },
        ]
    },
    "cluster_types": [{"name": "mc", "applications": ["a", "b"]}],
}

ROOTS = ["mc/e1/s1/r1", "mc/e1/s1/r2", "mc/e1/s2/r1", "mc/e2/s3/r3"]


def app_values(app: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {"applications": {app: fields}}


def base_files() -> dict[str, Any]:
    """Two applications with everything they need to render; no overrides, no patches."""
    files: dict[str, Any] = {
        "config/config.yaml": copy.deepcopy(CONFIG),
        "config/mc/application-defaults.yaml": {
            "defaults": {
                "project": "platform",
                "destination": {"name": "in-cluster", "namespace": "default"},
                "syncPolicy": {"syncOptions": ["CreateNamespace=true"]},
            }
        },
    }
    for app, version in (("a", "v1.0.0"), ("b", "v2.0.0")):
        files[f"config/mc/{app}/metadata.yaml"] = {"name": app, "owners": ["team@example.com"]}
        files[f"config/mc/{app}/OWNERS"] = {"approvers": ["lead"]}
        files[f"config/mc/{app}/values.yaml"] = app_values(
            app,
            {
                "source": {
                    "repoURL": f"https://charts.example.com/{app}",
                    "chart": app,
                    "targetRevision": version,
                },
                "destination": {"namespace": app},
            },
        )
    return files


def patch_doc(
    pid: str,
    app: str,
    fields: dict[str, Any],
    deps: list[dict[str, Any]] | None = None,
    strategy: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"id": pid, "description": f"test patch {pid}"}
    if deps:
        meta["dependencies"] = deps
    if strategy:
        meta["merge_strategy"] = strategy
    return {"metadata": meta, "patch": {app: fields}}


def layout_of(path: Path, files: dict[str, Any]) -> DimensionsLayout:
    write_files(path, files)
    return DimensionsLayout(WorkTree(path), FleetConfig())


def second_pass(files: Mapping[str, bytes], chart: Path, cluster: dict[str, str]) -> dict[str, str]:
    """A root's published chart (`files`, written to `chart`) rendered again the way the
    ApplicationSet's Helm pass does, with one cluster's values: template path → text."""
    for rel, data in files.items():
        (chart / rel).parent.mkdir(parents=True, exist_ok=True)
        (chart / rel).write_bytes(data)
    rendered = render_chart(
        chart, {"cluster": cluster}, release=cluster["name"], namespace="argocd", source="published"
    )
    return rendered.templates
