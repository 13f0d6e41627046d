"""Stored qrels are kept in the database (issue #25): ``qrels_sets`` (a tenant's qrels id),
``qrels_versions`` (each distinct version: metadata and compressed canonical text) and
``qrels_order`` (the versions as they were put); Redis becomes their cache (see
``backend/qrels_db.py``, which also carries the qrels Redis held over once, at start).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-27 12:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "qrels_sets",
        sa.Column("pk", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("qrels_id", sa.String(length=128), nullable=False),
        sa.Column("created", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_qrels_sets")),
    )
    op.create_index("uq_qrels_sets_tenant_qrels_id", "qrels_sets", ["tenant", "qrels_id"],
                    unique=True)
    op.create_index("ix_qrels_sets_tenant_created", "qrels_sets", ["tenant", "created"])
    op.create_table(
        "qrels_versions",
        sa.Column("set_pk", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("meta", sa.Text(), nullable=False),
        sa.Column("text", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["set_pk"], ["qrels_sets.pk"],
                                name=op.f("fk_qrels_versions_set_pk_qrels_sets"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("set_pk", "version", name=op.f("pk_qrels_versions")),
    )
    op.create_table(
        "qrels_order",
        sa.Column("set_pk", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(["set_pk", "version"],
                                ["qrels_versions.set_pk", "qrels_versions.version"],
                                name=op.f("fk_qrels_order_set_pk_qrels_versions"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("set_pk", "position", name=op.f("pk_qrels_order")),
    )


def downgrade() -> None:
    op.drop_table("qrels_order")
    op.drop_table("qrels_versions")
    op.drop_index("ix_qrels_sets_tenant_created", table_name="qrels_sets")
    op.drop_index("uq_qrels_sets_tenant_qrels_id", table_name="qrels_sets")
    op.drop_table("qrels_sets")
