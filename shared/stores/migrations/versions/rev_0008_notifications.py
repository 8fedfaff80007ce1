"""Notifications (`notifications`): one row per event and sink, written once per event id (the
primary key), delivered by the workers' notifiers with leases, retries and backoff, and listed
on the job page.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "notifications",
        sa.Column("event_id", sa.String(160), primary_key=True),
        sa.Column("sink", sa.String(32), primary_key=True),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("repo", sa.String(255), nullable=False),
        sa.Column("root", sa.String(512), nullable=True),
        sa.Column("deployment_id", sa.String(64), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("claim_token", sa.String(32), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_notifications_state_next", "notifications", ["state", "next_attempt_at"])
    op.create_index("ix_notifications_deployment_id", "notifications", ["deployment_id"])


def downgrade() -> None:
    op.drop_index("ix_notifications_deployment_id", table_name="notifications")
    op.drop_index("ix_notifications_state_next", table_name="notifications")
    op.drop_table("notifications")
