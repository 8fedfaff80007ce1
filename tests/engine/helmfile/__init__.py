"""Tests of the helmfile layout (shared/engine/helmfile)."""
