"""Hotfixes (`deployments.hotfix_pr`, `deployments.hotfix_head`): a deployment of an unmerged
pull request's head says which pull request and head, so the job page, the root page and the
notifications mark it as a hotfix. Null for every other deployment.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deployments") as batch:
        batch.add_column(sa.Column("hotfix_pr", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("hotfix_head", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("deployments") as batch:
        batch.drop_column("hotfix_head")
        batch.drop_column("hotfix_pr")
