"""JSON Schemas of every fleet file kind, generated from the pydantic models that parse them.

The models are the single source of truth; `docs/schemas/` holds their published form for
editors (yaml-language-server) and other tools. `make test` checks the two agree:

    python -m shared.engine.schemas docs/schemas          # write
    python -m shared.engine.schemas --check docs/schemas  # fail when out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from shared.engine.atlas.files import ATLAS_SCHEMAS
from shared.engine.config.fleet import FleetConfig
from shared.engine.dimensions.models import DIMENSIONS_SCHEMAS

SCHEMA_BASE = "https://rollwright.dev/schemas/"


def registry() -> dict[str, type[BaseModel] | dict[str, Any]]:
    """File kind → model (or a hand-written schema for free-form files such as values)."""
    kinds: dict[str, type[BaseModel] | dict[str, Any]] = {"rollwright": FleetConfig}
    kinds.update(ATLAS_SCHEMAS)
    kinds.update(DIMENSIONS_SCHEMAS)
    return kinds


def schema_of(kind: str, model: type[BaseModel] | dict[str, Any]) -> dict[str, Any]:
    body = model if isinstance(model, dict) else model.model_json_schema(by_alias=True)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"{SCHEMA_BASE}{kind}.json",
        **body,
    }


def render_all() -> dict[str, str]:
    return {
        f"{kind}.json": json.dumps(schema_of(kind, model), indent=2, sort_keys=True) + "\n"
        for kind, model in sorted(registry().items())
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.engine.schemas")
    parser.add_argument("directory")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    out = Path(args.directory)
    wanted = render_all()
    if args.check:
        stale = [
            name
            for name, text in wanted.items()
            if not (out / name).is_file() or (out / name).read_text() != text
        ]
        extra = sorted(p.name for p in out.glob("*.json") if p.name not in wanted)
        if stale or extra:
            print(
                f"schemas out of date in {out}: {', '.join(stale + extra)}; run `make schemas`",
                file=sys.stderr,
            )
            return 1
        return 0
    out.mkdir(parents=True, exist_ok=True)
    for name, text in wanted.items():
        (out / name).write_text(text)
    for path in out.glob("*.json"):
        if path.name not in wanted:
            path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
