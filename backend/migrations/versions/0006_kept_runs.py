"""Kept runs (issue #31): ``kept_runs`` (a tenant's run, once per content digest: the SHA-256
of its canonical rows, see ``backend/kept_runs.py``) and ``kept_run_chunks`` (its Parquet
bytes, zstd, in bounded-size blobs in order); a result's ``run_sha256`` (the run it kept, NULL
for none; indexed with the tenant, which counts a run's references) and a system's
``keep_runs`` (its results keep their runs by default; NULL: no).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27 23:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "kept_runs",
        sa.Column("pk", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("n_rows", sa.BigInteger(), nullable=False),
        sa.Column("n_topics", sa.Integer(), nullable=False),
        sa.Column("n_bytes", sa.BigInteger(), nullable=False),
        sa.Column("n_chunks", sa.Integer(), nullable=False),
        sa.Column("created", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_kept_runs")),
    )
    op.create_index("uq_kept_runs_tenant_sha256", "kept_runs", ["tenant", "sha256"],
                    unique=True)
    op.create_table(
        "kept_run_chunks",
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["run_pk"], ["kept_runs.pk"],
                                name=op.f("fk_kept_run_chunks_run_pk_kept_runs"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_pk", "seq", name=op.f("pk_kept_run_chunks")),
    )
    # add_column of a nullable column, and an index, need no table rebuild on SQLite
    op.add_column("results", sa.Column("run_sha256", sa.String(length=64), nullable=True))
    op.create_index("ix_results_tenant_run_sha256", "results", ["tenant", "run_sha256"])
    op.add_column("systems", sa.Column("keep_runs", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("systems") as batch:
        batch.drop_column("keep_runs")
    op.drop_index("ix_results_tenant_run_sha256", table_name="results")
    with op.batch_alter_table("results") as batch:
        batch.drop_column("run_sha256")
    op.drop_table("kept_run_chunks")
    op.drop_index("uq_kept_runs_tenant_sha256", table_name="kept_runs")
    op.drop_table("kept_runs")
