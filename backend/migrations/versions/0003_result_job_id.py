"""Queued records are idempotent by job id (issue #25): a result recorded by a queued job,
and a gate verdict a queued comparison keeps, carry the job's id, unique per tenant (per
result for verdicts), so a job retried after a database outage finds what it recorded
instead of recording it twice. NULL for what the synchronous API records (NULLs are
distinct in a unique index on both PostgreSQL and SQLite).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-27 11:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # add_column of a nullable column, and indexes, need no table rebuild on SQLite
    op.add_column("results", sa.Column("job_id", sa.String(length=64), nullable=True))
    op.create_index("uq_results_tenant_job_id", "results", ["tenant", "job_id"], unique=True)
    op.add_column("gate_verdicts", sa.Column("job_id", sa.String(length=64), nullable=True))
    op.create_index("uq_gate_verdicts_result_job_id", "gate_verdicts",
                    ["result_pk", "job_id"], unique=True)


def downgrade() -> None:
    op.drop_index("uq_gate_verdicts_result_job_id", table_name="gate_verdicts")
    with op.batch_alter_table("gate_verdicts") as batch:
        batch.drop_column("job_id")
    op.drop_index("uq_results_tenant_job_id", table_name="results")
    with op.batch_alter_table("results") as batch:
        batch.drop_column("job_id")
