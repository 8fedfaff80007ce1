"""The audit trail: who approved, rejected or unlocked what, from where, and whether it
counted (a click on another deployment's check run is refused and recorded here).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("root", sa.String(512), nullable=True),
        sa.Column("deployment_id", sa.String(64), nullable=True),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("actor", sa.String(255), nullable=True),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("counted", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False, server_default=""),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_audit_events_deployment_id", "audit_events", ["deployment_id"])


def downgrade() -> None:
    op.drop_index("ix_audit_events_deployment_id", table_name="audit_events")
    op.drop_table("audit_events")
