"""Deployment history: timings on `deployments` and one `deployment_events` row per state
change; check run ids as 64-bit integers (GitHub's ids outgrew 32 bits).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

# frozen here: a migration must not change when the code's notion changes
TERMINAL_STATES = ("published", "rejected", "timed_out", "skipped", "failed", "cancelled")

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deployments") as batch:
        batch.add_column(sa.Column("started_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("approved_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True))
    if op.get_bind().dialect.name != "sqlite":  # SQLite's INTEGER holds 64 bits already
        op.alter_column(
            "deployments",
            "check_run_id",
            type_=sa.BigInteger(),
            existing_type=sa.Integer(),
            existing_nullable=True,
        )
    op.create_table(
        "deployment_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("deployment_id", sa.String(64), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column(
            "check_run_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True
        ),
    )
    op.create_index("ix_deployment_events_deployment_id", "deployment_events", ["deployment_id"])
    # What is known of deployments recorded before: their current state as one event, when
    # it was reached; started when no longer queued, finished when terminal.
    op.execute(
        "INSERT INTO deployment_events (deployment_id, state, at, message, check_run_id) "
        "SELECT deployment_id, state, updated_at, message, check_run_id FROM deployments"
    )
    op.execute("UPDATE deployments SET started_at = created_at WHERE state <> 'queued'")
    terminal = ", ".join(f"'{state}'" for state in TERMINAL_STATES)
    op.execute(f"UPDATE deployments SET finished_at = updated_at WHERE state IN ({terminal})")


def downgrade() -> None:
    op.drop_index("ix_deployment_events_deployment_id", table_name="deployment_events")
    op.drop_table("deployment_events")
    if op.get_bind().dialect.name != "sqlite":
        op.alter_column(
            "deployments",
            "check_run_id",
            type_=sa.Integer(),
            existing_type=sa.BigInteger(),
            existing_nullable=True,
        )
    with op.batch_alter_table("deployments") as batch:
        batch.drop_column("finished_at")
        batch.drop_column("approved_at")
        batch.drop_column("started_at")
