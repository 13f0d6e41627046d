"""The systems' per-topic values under two judgments, from the recorded results (issue #31):
what ``GET /v1/stability`` hands :func:`cranfield.compare.stability.stability`.

A judgment is a qrels version as results record it (``results.qrels_version``: stored qrels'
``id@version``; a judge's or a consensus version is a version like any other). For each of
the tenant's systems with a result holding the measure under both versions, one result under
each is chosen (:func:`choose_results`):

- **the same night**: a result re-scored under other qrels names the result it re-scores
  (``results.rescores``, migration 0007, :mod:`backend.rescoring`) and keeps its recorded
  time; the results of one night are the original and its re-scorings. The newest night the
  system has a result of under both versions gives the pair (``paired_by: "night"``);
- **else the latest** result under each version (``paired_by: "latest"``): then the two may
  be of different nights, and the document says so per system.

The values are each result's recorded per-topic values of the measure
(:meth:`ResultStore.per_topic`). The matrices keep the topics every chosen result has a
finite value for (:func:`value_matrices`): the statistics pair topics, so a topic one judgment
or one system lacks is left out of all, and the document says which.

Work is bounded before it is done: :func:`choose_results` reads only the results' summary
columns, :func:`topic_bound` the number of values each chosen column holds, so the caller
checks systems × topics × resamples against its budget before any per-topic value is read.

The three reads are separate statements, so results can change between them (a re-score
recording, a result deleted): a chosen result deleted before its values are read raises
:class:`ResultGone` (the caller chooses again); a column that cannot be decoded (its length
not the result's topic count) leaves its system out, named in ``Matrices.unreadable``.
"""

from __future__ import annotations

import json
import math
import zlib
from dataclasses import dataclass

import numpy as np
from sqlalchemy import func, select

from .results import JSON, Result, ResultStore, ResultValues, System, iso
from .store import NotFound
from .versioned_sets import tenant_key


class ResultGone(LookupError):
    """A chosen result was deleted before its per-topic values were read (its id in
    ``args[0]``): the choice is stale; choose again."""


@dataclass(frozen=True)
class Chosen:
    """One system's pair of results: ``from_id``/``to_id`` and their recorded times, the
    measure key each holds the measure under, and how they were paired."""

    system: str
    from_id: str
    from_created: str
    from_key: str
    to_id: str
    to_created: str
    to_key: str
    paired_by: str   # "night" or "latest"

    def describe(self) -> dict:
        return {"system": self.system, "paired_by": self.paired_by,
                "from": {"result_id": self.from_id, "created_at": self.from_created,
                         "measure": self.from_key},
                "to": {"result_id": self.to_id, "created_at": self.to_created,
                       "measure": self.to_key}}


def _night(result_id: str, rescores: str | None) -> str:
    """The night a result belongs to: the result it re-scores, else its own id."""
    return rescores or result_id


def recorded_under(store: ResultStore, tenant: str | None, version: str) -> bool:
    """Whether any result of the tenant was recorded under qrels ``version``."""
    with store.sessions() as session:
        return session.scalar(select(Result.id).where(
            Result.tenant == tenant_key(tenant), Result.qrels_version == version).limit(1)) \
            is not None


def measures_under(store: ResultStore, tenant: str | None, versions: tuple[str, str]
                   ) -> list[str]:
    """The measure keys the tenant's results under ``versions`` were recorded with (each
    once, reading each distinct measure list once)."""
    with store.sessions() as session:
        lists = session.scalars(select(Result.measures).where(
            Result.tenant == tenant_key(tenant),
            Result.qrels_version.in_(list(versions))).distinct()).all()
    return list(dict.fromkeys(k for text in sorted(lists) for k in json.loads(text)))


def choose_results(store: ResultStore, tenant: str | None, from_version: str,
                   to_version: str, keys: list[str]) -> tuple[list[Chosen], dict]:
    """The pair of results of each of the tenant's systems with a result holding one of
    ``keys`` (spellings of one measure; the first a result has is its key) under both
    versions, systems by name; and ``{"from_only": [...], "to_only": [...]}``: the systems
    with such a result under one version only."""
    rescores = getattr(Result, "rescores", None)  # migration 0007's link
    columns = [System.name, Result.id, Result.qrels_version, Result.created_at,
               Result.measures]
    if rescores is not None:
        columns.append(rescores)
    with store.sessions() as session:
        rows = session.execute(
            select(*columns).join(System, System.pk == Result.system_pk)
            .where(Result.tenant == tenant_key(tenant),
                   Result.qrels_version.in_([from_version, to_version]))
            .order_by(System.name, Result.created_at.desc(), Result.pk.desc())).all()
    by_system: dict[str, dict[str, list]] = {}
    for row in rows:
        name, rid, version, created, measures = row[:5]
        link = row[5] if len(row) > 5 else None
        held = json.loads(measures)
        key = next((k for k in keys if k in held), None)
        if key is None:
            continue
        side = "from" if version == from_version else "to"
        by_system.setdefault(name, {"from": [], "to": []})[side].append(
            (rid, iso(created), key, _night(rid, link), created))
    chosen, left = [], {"from_only": [], "to_only": []}
    for name, sides in by_system.items():
        if not sides["to"]:
            left["from_only"].append(name)
            continue
        if not sides["from"]:
            left["to_only"].append(name)
            continue
        nights_to = {}
        for item in sides["to"]:       # newest first: the first of a night is kept
            nights_to.setdefault(item[3], item)
        pair, how = None, "latest"
        for item in sides["from"]:     # newest first
            if item[3] in nights_to:
                pair, how = (item, nights_to[item[3]]), "night"
                break
        if pair is None:
            pair = (sides["from"][0], sides["to"][0])
        (fid, fcreated, fkey, _, _), (tid, tcreated, tkey, _, _) = pair
        chosen.append(Chosen(name, fid, fcreated, fkey, tid, tcreated, tkey, how))
    return chosen, left


def topic_bound(store: ResultStore, chosen: list[Chosen]) -> tuple[int, int]:
    """(the most topics the matrices can have, the values :func:`value_matrices` reads):
    the fewest finite values any chosen result recorded for its measure
    (``result_values.n``; 0 when one has no per-topic values), and the sum over the chosen
    results of the values each one's column holds (its length in numbers, whatever is
    finite: every value of a column is decoded; a column of JSON values by its bytes)."""
    if not chosen:
        return 0, 0
    wanted = [(c.from_id, c.from_key) for c in chosen] + [(c.to_id, c.to_key) for c in chosen]
    ids = [rid for rid, _ in wanted]
    with store.sessions() as session:
        found = session.execute(
            select(Result.id, ResultValues.measure, ResultValues.n, ResultValues.kind,
                   func.length(ResultValues.data))
            .join(ResultValues, ResultValues.result_pk == Result.pk)
            .where(Result.id.in_(ids))).all()
    n = {(rid, m): count for rid, m, count, _, _ in found}
    held = {(rid, m): max(int(count or 0), int(size or 0) // (1 if kind == JSON else 8))
            for rid, m, count, kind, size in found}
    return (min(int(n.get(pair, 0) or 0) for pair in wanted),
            sum(held.get(pair, 0) for pair in wanted))


@dataclass(frozen=True)
class Matrices:
    """What :func:`value_matrices` read: ``topics`` (every kept system's results have a finite
    value for each), ``a`` and ``b`` the ``(systems, topics)`` values under ``from`` and
    ``to``, ``left_topics`` the topics some result lacks, ``chosen`` the systems kept (in the
    order given) and ``unreadable`` the systems left out because a column of theirs could
    not be decoded (``{"system", "result_id", "measure", "reason"}`` each)."""

    topics: list[str]
    a: np.ndarray
    b: np.ndarray
    left_topics: list[str]
    chosen: list[Chosen]
    unreadable: list[dict]


def value_matrices(store: ResultStore, tenant: str | None, chosen: list[Chosen]) -> Matrices:
    """The topics every chosen result has a finite value of its measure for (in the first
    kept result's order), the ``(systems, topics)`` matrices under ``from`` and ``to``, and
    the topics left out (one result or another lacks them, or has no finite value).

    A chosen result deleted since it was chosen: :class:`ResultGone`. A column whose stored
    values cannot be decoded (a length other than the result's topics, bad JSON): its system
    is left out and named in ``unreadable``, rather than failing the whole document."""
    columns, kept_chosen, unreadable = [], [], []
    for c in chosen:
        pair = []
        for rid, key in ((c.from_id, c.from_key), (c.to_id, c.to_key)):
            try:
                values = store.per_topic(tenant, rid, [key]).get(key, {})
            except NotFound:
                raise ResultGone(rid) from None
            except (ValueError, IndexError, zlib.error) as exc:
                unreadable.append({"system": c.system, "result_id": rid, "measure": key,
                                   "reason": str(exc)[:200]})
                break
            pair.append({t: float(v) for t, v in values.items() if _finite(v)})
        else:
            columns += pair
            kept_chosen.append(c)
    if not columns:
        return Matrices([], np.zeros((0, 0)), np.zeros((0, 0)), [], kept_chosen, unreadable)
    every = dict.fromkeys(t for col in columns for t in col)
    kept = [t for t in every if all(t in col for col in columns)]
    left = [t for t in every if t not in set(kept)]
    matrix = np.array([[col[t] for t in kept] for col in columns], dtype=float)
    matrix = matrix.reshape(len(columns), len(kept))
    return Matrices(kept, matrix[0::2], matrix[1::2], left, kept_chosen, unreadable)


def _finite(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def count_results(store: ResultStore, tenant: str | None, versions: tuple[str, str]) -> int:
    """How many of the tenant's results were recorded under ``versions`` (what
    :func:`choose_results` reads the summary columns of)."""
    with store.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(Result).where(
            Result.tenant == tenant_key(tenant),
            Result.qrels_version.in_(list(versions)))) or 0)
