"""A merged revision's deployments (the revision page, `/revisions/<owner>/<repo>/<sha>`): a
composite index that matches the query's filter (repository and revision) and its order (by
root, the newest of a root first), so the page reads its rows in index order instead of
scanning every deployment of the repository.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_deployments_repo_revision_root",
        "deployments",
        ["repo", "revision", "root", "created_at", "deployment_id"],
    )


def downgrade() -> None:
    op.drop_index("ix_deployments_repo_revision_root", table_name="deployments")
