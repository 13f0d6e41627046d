"""Stored topic metadata (issue #28): ``topic_metadata_sets`` (a tenant's metadata id) and
``topic_metadata_versions`` (each put that made a new latest version: its position, version,
digest, metadata and compressed canonical text), kept as stored qrels are (see
``backend/topic_metadata_db.py``); and ``result_segments``: a recorded result's per-segment
aggregates and weighted means (see ``backend/results.py``), which a trend reads by segment;
and the results' ``topic_metadata_version`` and ``topic_metadata_sha256``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27 18:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "topic_metadata_sets",
        sa.Column("pk", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("metadata_id", sa.String(length=128), nullable=False),
        sa.Column("created", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_topic_metadata_sets")),
    )
    op.create_index("uq_topic_metadata_sets_tenant_metadata_id", "topic_metadata_sets",
                    ["tenant", "metadata_id"], unique=True)
    op.create_index("ix_topic_metadata_sets_tenant_created", "topic_metadata_sets",
                    ["tenant", "created"])
    op.create_table(
        "topic_metadata_versions",
        sa.Column("set_pk", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("meta", sa.Text(), nullable=False),
        sa.Column("text", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["set_pk"], ["topic_metadata_sets.pk"],
                                name=op.f("fk_topic_metadata_versions_set_pk_topic_metadata_sets"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("set_pk", "position", name=op.f("pk_topic_metadata_versions")),
    )
    op.create_index("ix_topic_metadata_versions_set_pk_version", "topic_metadata_versions",
                    ["set_pk", "version"])
    op.create_table(
        "result_segments",
        sa.Column("result_pk", sa.Integer(), nullable=False),
        sa.Column("scope", sa.String(length=1), nullable=False),
        sa.Column("segment", sa.String(length=200), nullable=False),
        sa.Column("measure", sa.String(length=200), nullable=False),
        sa.Column("n_topics", sa.Integer(), nullable=False),
        sa.Column("value", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(["result_pk"], ["results.pk"],
                                name=op.f("fk_result_segments_result_pk_results"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("result_pk", "scope", "segment", "measure",
                                name=op.f("pk_result_segments")),
    )


    # add_column of a nullable column needs no table rebuild on SQLite
    op.add_column("results", sa.Column("topic_metadata_version", sa.String(length=200),
                                       nullable=True))
    op.add_column("results", sa.Column("topic_metadata_sha256", sa.String(length=64),
                                       nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.drop_column("topic_metadata_sha256")
        batch.drop_column("topic_metadata_version")
    op.drop_table("result_segments")
    op.drop_index("ix_topic_metadata_versions_set_pk_version",
                  table_name="topic_metadata_versions")
    op.drop_table("topic_metadata_versions")
    op.drop_index("ix_topic_metadata_sets_tenant_created", table_name="topic_metadata_sets")
    op.drop_index("uq_topic_metadata_sets_tenant_metadata_id",
                  table_name="topic_metadata_sets")
    op.drop_table("topic_metadata_sets")
