"""Alembic's environment: migrates the connection :func:`backend.results.migrate` passes in
``config.attributes["connection"]``, else one opened on ``sqlalchemy.url`` (authoring new
revisions). Online only: there is no SQL-script (offline) mode."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from backend.results import Base

config = context.config
target_metadata = Base.metadata


def run(connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata,
                      # SQLite alters a table by copying it: let future revisions do so
                      render_as_batch=connection.dialect.name == "sqlite",
                      compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("the recorded-results migrations run online only")

connection = config.attributes.get("connection")
if connection is not None:
    run(connection)
else:
    engine = create_engine(config.get_main_option("sqlalchemy.url"))
    try:
        with engine.begin() as connection:
            run(connection)
    finally:
        engine.dispose()
