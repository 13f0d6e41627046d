"""Recorded results (issue #18): systems, results, their tags, per-topic values, baselines.

Revision ID: 0001
Revises:
Create Date: 2026-11-23 23:32:23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "systems",
        sa.Column("pk", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_systems")),
    )
    op.create_index("uq_systems_tenant_name", "systems", ["tenant", "name"], unique=True)

    op.create_table(
        "results",
        sa.Column("pk", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("system_pk", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=False),
        sa.Column("commit", sa.String(length=100), nullable=True),
        sa.Column("tags", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("qrels_version", sa.String(length=200), nullable=True),
        sa.Column("qrels_sha256", sa.String(length=64), nullable=True),
        sa.Column("measures", sa.Text(), nullable=False),
        sa.Column("aggregate", sa.Text(), nullable=False),
        sa.Column("topics", sa.LargeBinary(), nullable=True),
        sa.Column("document", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["system_pk"], ["systems.pk"],
                                name=op.f("fk_results_system_pk_systems"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_results")),
        sa.UniqueConstraint("id", name=op.f("uq_results_id")),
    )
    op.create_index("ix_results_system_created", "results", ["system_pk", "created_at"])

    op.create_table(
        "baselines",
        sa.Column("system_pk", sa.Integer(), nullable=False),
        sa.Column("result_pk", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["result_pk"], ["results.pk"],
                                name=op.f("fk_baselines_result_pk_results"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["system_pk"], ["systems.pk"],
                                name=op.f("fk_baselines_system_pk_systems"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("system_pk", name=op.f("pk_baselines")),
    )
    op.create_index(op.f("ix_baselines_result_pk"), "baselines", ["result_pk"])

    op.create_table(
        "result_tags",
        sa.Column("result_pk", sa.Integer(), nullable=False),
        sa.Column("tag", sa.String(length=100), nullable=False),
        sa.ForeignKeyConstraint(["result_pk"], ["results.pk"],
                                name=op.f("fk_result_tags_result_pk_results"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("result_pk", "tag", name=op.f("pk_result_tags")),
    )
    op.create_index("ix_result_tags_tag", "result_tags", ["tag"])

    op.create_table(
        "result_values",
        sa.Column("result_pk", sa.Integer(), nullable=False),
        sa.Column("measure", sa.String(length=200), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=1), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("flags", sa.LargeBinary(), nullable=True),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("mean", sa.Double(), nullable=True),
        sa.Column("ci_low", sa.Double(), nullable=True),
        sa.Column("ci_high", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(["result_pk"], ["results.pk"],
                                name=op.f("fk_result_values_result_pk_results"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("result_pk", "measure", name=op.f("pk_result_values")),
    )


def downgrade() -> None:
    op.drop_table("result_values")
    op.drop_index("ix_result_tags_tag", table_name="result_tags")
    op.drop_table("result_tags")
    op.drop_index(op.f("ix_baselines_result_pk"), table_name="baselines")
    op.drop_table("baselines")
    op.drop_index("ix_results_system_created", table_name="results")
    op.drop_table("results")
    op.drop_index("uq_systems_tenant_name", table_name="systems")
    op.drop_table("systems")
