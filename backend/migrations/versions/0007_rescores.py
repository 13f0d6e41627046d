"""Re-scoring (issue #31): a result re-scored under other qrels names the result it re-scores
(``results.rescores``: its id; NULL for a result an evaluation recorded), once per qrels
digest (a unique index on both: re-scoring it again under the same qrels finds the one
recorded; NULLs are distinct on PostgreSQL and SQLite). ``rescores`` (a request to re-score
systems' results under a qrels version) and ``rescore_items`` (one per result it covers: its
state, why it was skipped or failed, the result it recorded) keep its progress in the
database, so it outlives a Redis restart.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27 23:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # add_column of a nullable column, and an index, need no table rebuild on SQLite
    op.add_column("results", sa.Column("rescores", sa.String(length=32), nullable=True))
    op.create_index("uq_results_rescores_qrels_sha256", "results",
                    ["rescores", "qrels_sha256"], unique=True)
    op.create_table(
        "rescores",
        sa.Column("pk", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("qrels_version", sa.String(length=200), nullable=False),
        sa.Column("qrels_sha256", sa.String(length=64), nullable=False),
        sa.Column("systems", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_rescores")),
    )
    op.create_index("uq_rescores_id", "rescores", ["id"], unique=True)
    op.create_table(
        "rescore_items",
        sa.Column("rescore_pk", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("result_id", sa.String(length=32), nullable=False),
        sa.Column("system", sa.String(length=200), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("new_result_id", sa.String(length=32), nullable=True),
        sa.Column("job_id", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(["rescore_pk"], ["rescores.pk"],
                                name=op.f("fk_rescore_items_rescore_pk_rescores"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("rescore_pk", "position", name=op.f("pk_rescore_items")),
    )


def downgrade() -> None:
    op.drop_table("rescore_items")
    op.drop_index("uq_rescores_id", table_name="rescores")
    op.drop_table("rescores")
    op.drop_index("uq_results_rescores_qrels_sha256", table_name="results")
    with op.batch_alter_table("results") as batch:
        batch.drop_column("rescores")
