"""helm_python (the Helm v4 Go SDK through ctypes) as `shared.engine.helm.engine` calls it.

Importing helm_python opens the Go runtime (a dlopen of tens of milliseconds), so `engine`
imports this module inside the functions that call into Go, never at its top: a command that
renders no template and loads no chart (`roots --changed`) never pays for it (start-up time).
Nothing else imports it; everything outside the `helm` package goes through `engine`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import helm_python as helm
from helm_python import HelmError, _native

__all__ = ["Chart", "HelmError", "Registry", "helm"]

# The binding's own log goes to `engine`'s logger (which turns it into debug output): INFO and
# above cross over, its debug chatter stays in the library. Once, when Go is first loaded.
helm.enable_logging(logging.INFO, logger=logging.getLogger("rollwright.helm"))


class Chart(helm.Chart):
    """helm_python's Chart, rendering with the options its `render` does not pass on (the
    native call takes them: `kube_version`, `api_versions`, `strict`)."""

    def render_with(self, values: dict[str, Any], options: dict[str, Any]) -> dict[str, str]:
        out = _native.call_string(
            "helm_render", self._raw(), json.dumps(values), json.dumps(options)
        )
        rendered: dict[str, str] = json.loads(out)
        return rendered


class Registry(helm.RegistryClient):
    """An OCI registry client holding credentials from the start (the native constructor
    takes them; the binding's `login` would also write them to a credentials file)."""

    def __init__(self, *, plain_http: bool, username: str, password: str, store: Path) -> None:
        options = {
            "plain_http": plain_http,
            "username": username,
            "password": password,
            "credentials_file": str(store),  # private, never Helm's own configuration
        }
        helm.NativeHandle.__init__(
            self, _native.call_handle("helm_registry_client_new", json.dumps(options))
        )
