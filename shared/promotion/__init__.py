"""Patch promotion through a fleet's sequence, as a pure engine over one revision."""
