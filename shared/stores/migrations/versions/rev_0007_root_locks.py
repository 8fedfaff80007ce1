"""The queue locks (`root_locks`): one row per root whose queue a manual deployment locks, from
when, until someone unlocks it. latest.json stays the lock's source of truth (the root queue
rebuilds it from there); this table is its copy for readers of many roots at once (the
gateway's metrics: a lock held over a day is an alert).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "root_locks",
        sa.Column("repo", sa.String(255), primary_key=True),
        sa.Column("root", sa.String(512), primary_key=True),
        sa.Column("deployment_id", sa.String(64), nullable=False),
        sa.Column("revision", sa.String(64), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("root_locks")
