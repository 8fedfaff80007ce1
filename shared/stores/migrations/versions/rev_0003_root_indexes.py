"""A root's deployments, newest first (`/roots`, `rollwright roots`): composite indexes that
match the queries' filter and order, so a page is read in index order instead of sorting every
deployment of the root. (root, …) serves every repository, (repo, root, …) one; the single
column index on `root` is a prefix of the new one and goes.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # deployment_id: the order's tie-breaker (same created_at), so no sort is left over
    op.create_index(
        "ix_deployments_root_created_at", "deployments", ["root", "created_at", "deployment_id"]
    )
    op.create_index(
        "ix_deployments_repo_root_created_at",
        "deployments",
        ["repo", "root", "created_at", "deployment_id"],
    )
    op.drop_index("ix_deployments_root", table_name="deployments")


def downgrade() -> None:
    op.create_index("ix_deployments_root", "deployments", ["root"])
    op.drop_index("ix_deployments_repo_root_created_at", table_name="deployments")
    op.drop_index("ix_deployments_root_created_at", table_name="deployments")
