"""Alembic migrations of rollwright's SQL tables, run in code by shared.stores.schema."""
