"""The audit trail's received clicks: `counted` may be null. The gateway records an Unlock or
a rollout click when it accepts the webhook, before anything judged it; the workflow records
whether it counted once an activity has judged it (docs/governance.md).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audit_events") as batch:
        batch.alter_column("counted", existing_type=sa.Boolean(), nullable=True)


def downgrade() -> None:
    # Received rows said nothing of the click's outcome: not counted, as far as they go.
    op.execute(sa.text("UPDATE audit_events SET counted = false WHERE counted IS NULL"))
    with op.batch_alter_table("audit_events") as batch:
        batch.alter_column("counted", existing_type=sa.Boolean(), nullable=False)
