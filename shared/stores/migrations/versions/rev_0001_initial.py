"""The tables as `create_all` made them before migrations: deployments, webhook deliveries,
jobs and the gateway outbox.

A database made by `create_all` (tables but no `alembic_version`) is adopted: a table that
exists is left as it is, a missing one is created (databases from before the outbox lack
`gateway_outbox`), and the database is then at 0001.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TABLES = ("deployments", "webhook_deliveries", "jobs", "gateway_outbox")


def upgrade() -> None:
    existing = set(sa.inspect(op.get_bind()).get_table_names())
    if "deployments" not in existing:
        op.create_table(
            "deployments",
            sa.Column("deployment_id", sa.String(64), primary_key=True),
            sa.Column("repo", sa.String(255), nullable=False),
            sa.Column("root", sa.String(512), nullable=False),
            sa.Column("revision", sa.String(64), nullable=False),
            sa.Column("trigger", sa.String(16), nullable=False),
            sa.Column("state", sa.String(32), nullable=False),
            sa.Column("requested_by", sa.String(255), nullable=True),
            sa.Column("approved_by", sa.String(255), nullable=True),
            sa.Column("check_run_id", sa.Integer(), nullable=True),
            sa.Column("render_digest", sa.String(80), nullable=True),
            sa.Column("added", sa.Integer(), nullable=True),
            sa.Column("removed", sa.Integer(), nullable=True),
            sa.Column("changed", sa.Integer(), nullable=True),
            sa.Column("message", sa.Text(), nullable=False),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        )
        for column in ("repo", "root", "state", "updated_at"):
            op.create_index(f"ix_deployments_{column}", "deployments", [column])
    if "webhook_deliveries" not in existing:
        op.create_table(
            "webhook_deliveries",
            sa.Column("delivery_id", sa.String(64), primary_key=True),
            sa.Column("event", sa.String(64), nullable=False),
            sa.Column("action", sa.String(64), nullable=True),
            sa.Column("repo", sa.String(255), nullable=True),
            sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("outcome", sa.String(255), nullable=False),
        )
    if "jobs" not in existing:
        op.create_table(
            "jobs",
            sa.Column("job_id", sa.String(128), primary_key=True),
            sa.Column("deployment_id", sa.String(64), nullable=False),
            sa.Column("kind", sa.String(64), nullable=False),
            sa.Column("log_key", sa.String(512), nullable=False),
            sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
            sa.Column("state", sa.String(32), nullable=False),
        )
        op.create_index("ix_jobs_deployment_id", "jobs", ["deployment_id"])
    if "gateway_outbox" not in existing:
        op.create_table(
            "gateway_outbox",
            # BIGSERIAL on PostgreSQL; SQLite needs exactly INTEGER PRIMARY KEY (rowid alias)
            sa.Column(
                "id",
                sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                primary_key=True,
                autoincrement=True,
            ),
            sa.Column("delivery_id", sa.String(64), nullable=False, unique=True),
            sa.Column("repo", sa.String(255), nullable=False),
            sa.Column("kind", sa.String(32), nullable=False),
            sa.Column("target", sa.String(1024), nullable=False),
            sa.Column("payload", sa.Text(), nullable=False),
            sa.Column("state", sa.String(16), nullable=False),
            sa.Column("attempts", sa.Integer(), nullable=False),
            sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("lease_owner", sa.String(128), nullable=True),
            sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
            sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
            sa.Column("outcome", sa.String(255), nullable=False),
            sa.Column("last_error", sa.Text(), nullable=False),
        )
        op.create_index("ix_gateway_outbox_pending", "gateway_outbox", ["state", "repo", "id"])


def downgrade() -> None:
    for table in reversed(TABLES):
        op.drop_table(table)
