"""Bytecode for the workflow modules, written once when the worker starts.

Temporal's sandbox imports a workflow's modules afresh for every workflow instance. Python
reads a module's cached bytecode when `__pycache__` holds a current one, and compiles the
source otherwise; with `PYTHONDONTWRITEBYTECODE=1` (set on many machines and images) nothing
ever writes that cache, so every instance compiled the workflow modules again (about 16 ms of
CPU for the whole package on this project's machines). `compileall` writes the cache whatever
that variable says, and imports read it whatever it says. A read-only install (an image built
by pip, which compiles at install) is left as it is.
"""

from __future__ import annotations

import compileall
import importlib.util
import logging
from pathlib import Path

log = logging.getLogger("rollwright.worker")


def precompile() -> bool:
    """Write the workflow package's bytecode where it is missing or stale; whether all of it
    is there now."""
    # found, not imported: the worker reaches the workflows through workflows.registry only
    spec = importlib.util.find_spec("workflows")
    if spec is None or not spec.submodule_search_locations:
        return False
    package = Path(next(iter(spec.submodule_search_locations)))
    try:
        done = bool(compileall.compile_dir(package, quiet=1, workers=1))
    except OSError as err:  # a read-only install: the sandbox compiles, as before
        log.info("workflow bytecode not written", extra={"error": str(err)})
        return False
    return done
