"""The embedded stack (`rollwright dev`, `rollwright demo`): a Temporal dev server, the worker,
the gateway and the GitHub emulator on loopback, with state under one data directory.

Modules: `ports` (free ports), `processes` (child supervision), `temporal` (dev server and
search attributes), `credentials` (generated App key and tokens), `stack` (`DevStack`),
`fleetrepo` (git fleet repos for the demo and tests), `demo` and `commands` (the CLI).
"""
