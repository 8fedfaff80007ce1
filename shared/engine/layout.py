"""What every fleet layout provides (`Layout`), what it says about a release (`ReleaseInfo`),
and which layout a fleet repo uses (`detect_layout`).

The layouts (`shared.engine.atlas`, `shared.engine.dimensions`) implement `Layout`;
`shared.engine.fleet` picks one and adds what is common to both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from shared.engine.config.fleet import CONFIG_FILE, FleetConfig
from shared.engine.errors import FleetError, Problem
from shared.engine.tree import Tree


@dataclass(frozen=True)
class ReleaseInfo:
    """What `rollwright values --release` and listings show about one release."""

    id: str  # "<deployment>/<release>" (atlas) or the root's chart name (dimensions)
    template: str
    namespace: str
    labels: dict[str, str]


class Layout(Protocol):
    name: str

    def roots(self) -> list[str]:
        """Root ids, sorted."""
        ...

    def releases(self, root: str) -> list[ReleaseInfo]: ...

    def values(self, root: str, release: str | None) -> dict[str, Any]:
        """Merged values of one release (atlas) or of the root (dimensions)."""
        ...

    def render_files(self, root: str) -> dict[str, bytes]:
        """Every output file of the root, path relative to the root directory (plaintext)."""
        ...

    def render_redacted(self, root: str) -> tuple[dict[str, bytes], dict[str, bytes]]:
        """(plaintext, redacted) output files of the root: secrets and what derives from
        them redacted by origin, `v1` `Secret` data hashed (docs/secrets.md)."""
        ...

    def redacted_values(self, root: str, release: str | None) -> dict[str, Any]:
        """`values()` with every leaf that holds or derives from a secret redacted."""
        ...

    def secret_values(self) -> list[Any]:
        """Every decrypted SOPS tree read so far, to keep plaintext out of error messages."""
        ...

    def affected(self, changed: set[str]) -> set[str]:
        """Roots (of this tree) whose render may change when `changed` paths change."""
        ...

    def validate(self) -> list[Problem]:
        """Every problem, content and hygiene (`Problem.hygiene`)."""
        ...

    def unread_values(self, root: str | None) -> list[Problem]:
        """Values keys the fleet sets that no template reads, those reaching `root` (None:
        all): warnings, or content problems under rollwright.yaml `strict`."""
        ...

    def refusals(self, root: str) -> list[Problem]:
        """The content problems that touch `root`: its render and values refuse with them
        rather than drop, ignore or change what the fleet asked for
        (docs/formats/problems.md)."""
        ...


def detect_layout(tree: Tree, config: FleetConfig) -> str:
    if config.layout:
        return config.layout
    if tree.is_file("config/config.yaml"):
        return "dimensions"
    if tree.is_dir("deployments"):
        return "atlas"
    raise FleetError(
        "cannot tell the fleet layout: no rollwright.yaml 'layout', no config/config.yaml "
        "(dimensions) and no deployments/ directory (atlas)",
        path=CONFIG_FILE,
    )
