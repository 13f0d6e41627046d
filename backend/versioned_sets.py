"""What the two durable stores of versioned ids in the results database share: stored qrels
(``backend/qrels_db.py``) and stored topic metadata (``backend/topic_metadata_db.py``). Each
keeps a set table (one row per tenant and id: ``pk``, ``tenant``, the id, ``created``, which
orders the listing) and a table of the id's versions as they were put, by ``position``
(``qrels_order``, ``topic_metadata_versions``). The shared space of a service without API
keys is the tenant ``''``."""

from __future__ import annotations

from sqlalchemy import Table, func, insert, select
from sqlalchemy.engine import Connection

# the tenant None (no API keys) in the database: here, below backend.results (which
# imports the two stores at its end), so that importing this module first is no circle
SHARED = ""


def tenant_key(tenant: str | None) -> str:
    """The tenant column's value: ``''`` for the shared space (None)."""
    return SHARED if tenant is None else tenant


def find_set(conn: Connection, sets: Table, id_column: str, tenant: str | None, ident: str,
             *, lock: bool = False):
    """The (pk, created) row of the tenant's id in ``sets`` (None: no such id); ``lock``: held
    FOR UPDATE on PostgreSQL, so concurrent writers of the id queue on it."""
    query = select(sets.c.pk, sets.c.created).where(sets.c.tenant == tenant_key(tenant),
                                                    sets.c[id_column] == ident)
    if lock and conn.dialect.name == "postgresql":
        query = query.with_for_update()
    return conn.execute(query).first()


def add_set(conn: Connection, sets: Table, id_column: str, tenant: str | None, ident: str,
            created: float) -> int:
    """Insert the tenant's id into ``sets``: its pk."""
    return conn.execute(insert(sets).values(
        {"tenant": tenant_key(tenant), id_column: ident, "created": created})
    ).inserted_primary_key[0]


def last_put(conn: Connection, order: Table, set_pk: int):
    """The (position, version) row of the id's latest put in ``order`` (None: none)."""
    return conn.execute(select(order.c.position, order.c.version)
                        .where(order.c.set_pk == set_pk)
                        .order_by(order.c.position.desc()).limit(1)).first()


def set_page(conn: Connection, sets: Table, columns: list, tenant: str | None, offset: int,
             limit: int) -> tuple[list, int | None]:
    """A page of the tenant's rows of ``sets`` (``columns`` of each), oldest first, and how
    many there are."""
    where = sets.c.tenant == tenant_key(tenant)
    total = conn.scalar(select(func.count()).select_from(sets).where(where))
    rows = conn.execute(select(*columns).where(where).order_by(sets.c.created, sets.c.pk)
                        .offset(offset).limit(limit)).all()
    return rows, total
