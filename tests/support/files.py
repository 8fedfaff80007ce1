"""Files of a test's fleet: written from a dict, copied from examples/, and the `.Values` the
echo chart saw read back from rendered files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import EXAMPLES


def write_files(base: Path, files: dict[str, Any]) -> None:
    """Write `files` (path → str, or a dict/list dumped as YAML) under `base`."""
    for rel, content in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not isinstance(content, str):
            content = yaml.safe_dump(content, sort_keys=False)
        path.write_text(content)


def copy_example(name: str, dest: Path) -> Path:
    shutil.copytree(EXAMPLES / name, dest)
    return dest


def echo_values(files: dict[str, bytes], suffix: str = "") -> dict[str, Any]:
    """The .Values the echo chart saw, from the one (or the `suffix`-matching) ConfigMap."""
    hits = [p for p in files if p.endswith(".yaml") and "ConfigMap_" in p and p.endswith(suffix)]
    assert hits, f"no echo ConfigMap among {sorted(files)}"
    assert len(hits) == 1, f"several echo ConfigMaps match {suffix!r}: {hits}"
    doc = yaml.safe_load(files[hits[0]])
    return json.loads(doc["data"]["values.json"])  # type: ignore[no-any-return]
