"""The YAML bytes of a catalog: Kapitan's dumper for compiled output, Commodore's for the
files a postprocessing filter rewrites and for secret reference files.

Both sort keys, indent block lists under their key, fold long plain scalars at 80 columns,
escape non-ASCII and write strings that hold a newline as `|` block scalars; a list is a
multi-document file (`---` between documents, none before the first)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml
from commodore.helpers import IndentedListDumper
from kapitan.utils import PrettyDumper

# Commodore runs Kapitan with `multiline_string_style: literal` and indent 2.
_KAPITAN_DUMPER = PrettyDumper.get_dumper_for_style("literal")


def kapitan_yaml(obj: Any) -> str:
    """A compiled output file, as Kapitan's `CompilingFile.write_yaml` writes it."""
    dump = yaml.dump if isinstance(obj, Mapping) else yaml.dump_all
    text: str = dump(obj, indent=2, Dumper=_KAPITAN_DUMPER, default_flow_style=False)
    return text


class _FilterDumper(IndentedListDumper):  # type: ignore[misc]
    """Commodore's `IndentedListDumper` with the string style its `yaml_dump` registers
    (globally, there; on this subclass only, here)."""


def _represent_str(dumper: yaml.Dumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_FilterDumper.add_representer(str, _represent_str)


def commodore_yaml(obj: Any) -> str:
    """A file Commodore writes itself (`yaml_dump`, or `yaml_dump_all` for a list)."""
    if isinstance(obj, list):
        many: str = yaml.dump_all(obj, Dumper=_FilterDumper)
        return many
    one: str = yaml.dump(obj, Dumper=_FilterDumper)
    return one
