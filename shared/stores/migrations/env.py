"""Alembic's environment for rollwright: always given a connection by shared.stores.schema, which
holds the migration lock and owns the transaction (no alembic.ini, no offline mode)."""

from __future__ import annotations

from alembic import context

from shared.stores.sql.tables import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "rollwright's migrations run through `rollwright db upgrade` (shared.stores.schema), "
        "which supplies the connection"
    )
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    # SQLite alters a table by copying it; alembic's batch mode does that
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
