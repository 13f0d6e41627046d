"""Alembic migrations of the recorded-results database (backend/results.py). Run by
:func:`backend.results.migrate` with a configuration built in code, so no alembic.ini is
needed at run time. A new revision, from the repository root::

    .venv/bin/python -c "from alembic.config import Config; from alembic import command; \\
        c = Config(); c.set_main_option('script_location', 'backend/migrations'); \\
        c.set_main_option('sqlalchemy.url', 'sqlite:///instance/cranfield.db'); \\
        command.revision(c, 'what changes', autogenerate=True)"
"""
