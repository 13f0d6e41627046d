"""Gate verdicts (issue #18): a gated comparison's verdict on each recorded result it checked,
so a system's trend can mark the nights a gate passed or failed.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24 02:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gate_verdicts",
        sa.Column("pk", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("result_pk", sa.Integer(), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("baseline_id", sa.String(length=32), nullable=True),
        sa.Column("checks", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["result_pk"], ["results.pk"],
                                name=op.f("fk_gate_verdicts_result_pk_results"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_gate_verdicts")),
    )
    op.create_index("ix_gate_verdicts_result_checked", "gate_verdicts",
                    ["result_pk", "checked_at"])


def downgrade() -> None:
    op.drop_index("ix_gate_verdicts_result_checked", table_name="gate_verdicts")
    op.drop_table("gate_verdicts")
