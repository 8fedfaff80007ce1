"""The render engine: a fleet repo at one revision → its roots and their renders.

Nothing here knows Temporal, the stores, GitHub or the service (an import-linter contract).
"""
