"""The commodore layout: each cluster of a Project Syn tenant compiled into its catalog as
Commodore 1.35 compiles it (docs/formats/commodore.md).

    layout = CommodoreLayout(WorkTree(Path("tenant-repo")), FleetConfig.load(tree))
    layout.roots()                  # ['c-demo', 'c-prod']: the cluster ids
    layout.render_files("c-demo")   # {"manifests/demo/00_namespace.yaml": b"...",
                                    #  "refs/t-acme/c-demo/demo/password": b"..."}

The inventory is reclass-rs's, the Jsonnet gojsonnet's, with Kapitan's natives, search paths,
YAML dumper and secret references and Commodore's libraries and filters, all taken from the
installed packages of the `rollwright[commodore]` extra.
"""

import importlib
import logging

from shared.engine.errors import FleetError

EXTRA_MODULES = ("kapitan", "commodore", "reclass_rs", "_gojsonnet")


def _import_the_extra() -> None:
    """The packages of the `commodore` extra, or an error saying how to install them.

    Kapitan calls `logging.basicConfig()` when first imported; logging is the process's to
    configure, so the root logger is put back as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        for name in EXTRA_MODULES:
            importlib.import_module(name)
    except ImportError as err:
        raise FleetError(
            f"the commodore layout needs the rollwright[commodore] extra ({err.name} is not "
            "installed): pip install 'rollwright[commodore]'",
            path="rollwright.yaml",
        ) from None
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


_import_the_extra()
