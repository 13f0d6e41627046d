"""Re-scored history (issue #31): a system's trend per qrels version, and its boundaries.

When a tenant's judgments change (a new version of stored qrels), its recorded results are
comparable only under one version at a time. This module reads a system's trend points (each
knowing the qrels it was evaluated under and, for a re-scored one, the result it re-scores)
and splits them into one series per qrels version, with the boundaries where the version
the system was evaluated under changes. The re-scoring itself (a job per kept run, recorded
as a new result linked to the one it re-scores) is further down.

Flask-free: the service (``service/results.py``, ``service/rescores.py``) and the workers
call it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    func,
    select,
    text,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column

from . import keys as redis_keys
from .results import Base, Result, System, iso, utc
from .versioned_sets import tenant_key

# fields a trend point carries for the series, not shown among ``points`` (whose shape old
# clients hold to: openapi's TrendPoint has no other field)
SERIES_FIELDS = ("qrels_version", "qrels_sha256", "rescores")


def public_point(point: dict | None) -> dict | None:
    """``point`` as the trend's ``points`` (and ``baseline_point``) have always shown it."""
    if point is None:
        return None
    return {k: v for k, v in point.items() if k not in SERIES_FIELDS}


def _series_key(point: dict) -> tuple[str | None, str | None]:
    """What a series is of: the qrels' digest (the judgments themselves), whatever the name
    they were evaluated under (a stored version, another id's version of the same
    judgments, or inline qrels: one series, as a gate compares by digest alone); a result
    that recorded no digest, by its version's name."""
    sha = point.get("qrels_sha256")
    return (sha, None) if sha is not None else (None, point.get("qrels_version"))


def trend_series(points: list[dict]) -> tuple[list[dict], list[dict]]:
    """(series, boundaries) of a system's trend ``points`` (oldest first, each with
    ``qrels_version``, ``qrels_sha256`` and ``rescores``: the id of the result it re-scores,
    None for a result recorded by an evaluation).

    ``series``: one per qrels digest, ``{"qrels_version", "qrels_versions", "qrels_sha256",
    "points"}`` (``qrels_version``: the first stored version its points name, None when all
    were inline; ``qrels_versions``: every stored version they name, in the order first
    seen, since the same judgments may be stored under several), its
    points oldest first (each with ``rescores``), ordered by when the system was first
    evaluated under it (a version only re-scores reached comes after those, in the order
    first re-scored). ``boundaries``: where the version of the system's own evaluations
    changes, ``{"from", "to", "after", "before", "at"}`` (``from``/``to``: ``{"qrels_version",
    "qrels_sha256"}``; ``after``: the last result under ``from``, ``before``: the first under
    ``to`` and ``at`` its time), and, for a version only re-scores reached, one after the last
    result evaluated (``before`` and ``at`` null: the judgments changed after it, and the
    history before it was re-scored)."""
    by_key: dict[tuple, dict] = {}
    first_own: dict[tuple, int] = {}
    first_any: dict[tuple, int] = {}
    for i, p in enumerate(points):
        key = _series_key(p)
        if key not in by_key:
            by_key[key] = {"qrels_version": None, "qrels_versions": [],
                           "qrels_sha256": key[0], "points": []}
            first_any[key] = i
        named = by_key[key]["qrels_versions"]
        if p.get("qrels_version") is not None and p["qrels_version"] not in named:
            named.append(p["qrels_version"])
            by_key[key]["qrels_version"] = named[0]
        by_key[key]["points"].append(public_point(p) | {"rescores": p.get("rescores")})
        if p.get("rescores") is None:
            first_own.setdefault(key, i)
    order = sorted(by_key, key=lambda k: (k not in first_own, first_own.get(k, first_any[k])))
    series = [by_key[k] for k in order]

    def version(key: tuple) -> dict:
        return {"qrels_version": by_key[key]["qrels_version"], "qrels_sha256": key[0]}

    boundaries: list[dict[str, Any]] = []
    own = [p for p in points if p.get("rescores") is None]
    for before, after in zip(own, own[1:], strict=False):
        if _series_key(before) != _series_key(after):
            boundaries.append({"from": version(_series_key(before)),
                               "to": version(_series_key(after)),
                               "after": before["id"], "before": after["id"],
                               "at": after["created_at"]})
    if own:
        last = _series_key(own[-1])
        for key in order:
            if key not in first_own:
                boundaries.append({"from": version(last), "to": version(key),
                                   "after": own[-1]["id"], "before": None, "at": None})
                last = key
    return series, boundaries


# --------------------------------------------------------------------------------------------
# Re-scoring: a request (``rescores``) and one item per result it covers (``rescore_items``),
# kept in the results database, so that its progress outlives Redis; one job per kept run.
# --------------------------------------------------------------------------------------------

log = logging.getLogger("cranfield.rescoring")

#: the worker's entry point, enqueued by dotted path
RESCORE_FUNCTION = "worker.jobs.rescore_job"
#: a re-score job's RQ meta: a tenant no caller has (1-64 printable characters), so
#: ``GET /v1/jobs/{id}`` is a 404 for it: its progress is ``GET /v1/rescores/{id}``'s
JOB_META = {"tenant": "\x00rescore", "kind": "rescore"}
QUEUED, DONE, FAILED, SKIPPED = "queued", "done", "failed", "skipped"
INLINE_METADATA = ("it was evaluated with inline topic metadata (options.topic_metadata), "
                   "which is not kept: its segments and weights cannot be made again (record "
                   "with stored topic metadata, topic_metadata_id, to re-score segments)")
# the engine options a re-score evaluates with, as the original result recorded them (the
# profile: as a fresh evaluation of the same request would have it, rescore_profile)
OPTIONS = ("profile", "relevance_level", "judged_only", "depth", "complete_topics",
           "collection_size", "aggregation")


def rescore_profile(options: dict, meta: dict) -> str:
    """The profile a re-score runs under: the one a fresh evaluation of the original request
    against the new version would get (issue #31). A result records the profile it was
    evaluated under, resolved, not whether its request named one; so the recorded profile
    counts as named unless it is the one an evaluation naming none would have had with the
    original's own gains (``options["gains"]``: ``"real"`` or absent,
    :func:`cranfield.measures.resolve_profile`): a profile equal to its default is taken as
    the default. Named, it is kept (a trec_eval profile under qrels declaring real gains then
    refuses a grade that is not an integer, as a fresh evaluation naming it does); not named,
    it is the default for the new version's gains (``meta["gains"]``): cranfield's for
    qrels put declaring real gains, trec_eval-9.0.8's for integer grades."""
    from cranfield.measures import resolve_profile

    recorded = options.get("profile")
    if recorded is not None and recorded != resolve_profile(None, options.get("gains")):
        return recorded
    return resolve_profile(None, meta.get("gains"))


class Rescore(Base):
    """A request to re-score systems' results under one stored qrels version."""
    __tablename__ = "rescores"
    __table_args__ = (Index("uq_rescores_id", "id", unique=True),)

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(32))
    tenant: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    qrels_version: Mapped[str] = mapped_column(String(200))   # id@version
    qrels_sha256: Mapped[str] = mapped_column(String(64))
    systems: Mapped[str] = mapped_column(Text)                # JSON list of names


class RescoreItem(Base):
    """One result a re-score covers: queued, done (``new_result_id``), failed or skipped
    (``reason``)."""
    __tablename__ = "rescore_items"

    rescore_pk: Mapped[int] = mapped_column(ForeignKey("rescores.pk", ondelete="CASCADE"),
                                            primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    result_id: Mapped[str] = mapped_column(String(32))
    system: Mapped[str] = mapped_column(String(200))
    state: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    new_result_id: Mapped[str | None] = mapped_column(String(32))
    job_id: Mapped[str | None] = mapped_column(String(64))


def _rescored_under(session, original_id: str, qrels_sha256: str) -> str | None:
    """The id of the result re-scoring ``original_id`` under ``qrels_sha256``, if one is."""
    return session.scalar(select(Result.id).where(Result.rescores == original_id,
                                                  Result.qrels_sha256 == qrels_sha256))


def rescored_result(results, tenant: str | None, original_id: str,
                    qrels_sha256: str) -> dict | None:
    """The summary of the tenant's result re-scoring ``original_id`` under the qrels of
    ``qrels_sha256`` (what a gate compares a baseline by when the candidate was evaluated
    under other qrels), or None."""
    with results.sessions() as session:
        found = session.scalar(select(Result).where(
            Result.tenant == tenant_key(tenant), Result.rescores == original_id,
            Result.qrels_sha256 == qrels_sha256))
        if found is None:
            return None
        name = session.scalar(select(System.name).where(System.pk == found.system_pk))
        return results.summary_of(found, name)


def original_of(results, tenant: str | None, result_id: str) -> dict | None:
    """The summary of the tenant's result that ``result_id`` re-scores, or None when an
    evaluation recorded it (or the original is gone)."""
    with results.sessions() as session:
        original = session.scalar(select(Result.rescores).where(
            Result.tenant == tenant_key(tenant), Result.id == result_id))
        if original is None:
            return None
        found = session.scalar(select(Result).where(
            Result.tenant == tenant_key(tenant), Result.id == original))
        if found is None:
            return None
        name = session.scalar(select(System.name).where(System.pk == found.system_pk))
        return results.summary_of(found, name)


def count_results(results, tenant: str | None, systems: list[str]) -> int:
    """How many results (re-scores not counted) the systems hold: a request's size, known
    before anything is planned (MAX_RESCORE_RESULTS)."""
    with results.sessions() as session:
        return int(session.scalar(
            select(func.count()).select_from(Result).join(System, System.pk == Result.system_pk)
            .where(System.tenant == tenant_key(tenant), System.name.in_(systems),
                   Result.rescores.is_(None))) or 0)


def _skip_reason(result: Result, qrels_sha256: str) -> str | None:
    if result.qrels_sha256 == qrels_sha256:
        return "it was evaluated under these qrels already"
    if result.run_sha256 is None:
        return ("its run was not kept (record with keep_run: true to keep runs for "
                "re-scoring)")
    if result.topic_metadata_sha256 is not None and result.topic_metadata_version is None:
        return INLINE_METADATA
    return None


class TooManyQueued(Exception):
    """A re-score would take the tenant's queued re-score jobs past ``MAX_QUEUED_RESCORES``."""

    def __init__(self, queued: int, adding: int, cap: int):
        super().__init__(f"{queued} re-score jobs are queued or running for you and this "
                         f"re-score adds {adding}; the limit is MAX_QUEUED_RESCORES ({cap}): "
                         "wait for some to finish")
        self.queued, self.adding, self.cap = queued, adding, cap


def in_flight_horizon(config: dict) -> timedelta:
    """How long an item stays counted as queued (``MAX_QUEUED_RESCORES``) and shared with a
    later re-score: past ``QUEUED_TTL`` plus its three attempts' ``JOB_TIMEOUT``, its job
    has left RQ (ran or expired), and an item still queued is one the queue lost, which the
    re-score's GET queues again."""
    from .contract import JOB_ATTEMPTS

    return timedelta(seconds=config["QUEUED_TTL"] + JOB_ATTEMPTS * config["JOB_TIMEOUT"])


def _lock_tenant(session, tenant: str | None) -> None:
    """Serialize the tenant's plans (count, then insert): a transaction-scoped advisory lock
    on PostgreSQL; SQLite's one writer already does it (the re-score row is written
    first)."""
    if session.bind.dialect.name == "postgresql":
        key = int.from_bytes(hashlib.sha256(
            b"cranfield-rescore\0" + tenant_key(tenant).encode()).digest()[:8], "big",
            signed=True)
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


def _in_flight(session, tenant: str | None, qrels_sha256: str,
               since: datetime | None) -> tuple[int, dict[str, str]]:
    """(the tenant's queued re-score jobs, counted once each; for the results queued under
    ``qrels_sha256``, result id -> the job that re-scores it), items of re-scores made
    since ``since`` (all, if None)."""
    query = (select(RescoreItem.result_id, RescoreItem.job_id, Rescore.qrels_sha256)
             .join(Rescore, Rescore.pk == RescoreItem.rescore_pk)
             .where(Rescore.tenant == tenant_key(tenant), RescoreItem.state == QUEUED))
    if since is not None:
        query = query.where(Rescore.created_at >= since)
    rows = session.execute(query).all()
    return (len({r.job_id for r in rows}),
            {r.result_id: r.job_id for r in rows if r.qrels_sha256 == qrels_sha256})


def plan(results, tenant: str | None, systems: list[str], qrels_version: str,
         qrels_sha256: str, *, max_queued: int | None = None,
         horizon: timedelta | None = None) -> tuple[str, list[dict]]:
    """Keep a re-score of the systems' results (oldest first, system by system) under the
    stored qrels ``qrels_version`` (digest ``qrels_sha256``): one item per result, queued
    when it has a kept run, skipped (with the reason) when not, done at once when it was
    re-scored under these qrels before (nothing new is recorded). A result another re-score
    of the tenant has queued under the same qrels is queued under that job (no second job):
    it is done when that job records (:func:`progress`). Returns its id and the items to
    queue (``{"position", "result_id", "job_id"}``).

    ``max_queued`` (``MAX_QUEUED_RESCORES``): :class:`TooManyQueued`, nothing kept, when the
    tenant's queued jobs (items of re-scores made within ``horizon``) and the new ones would
    be more; counted and kept in one transaction, the tenant's plans one at a time."""
    rescore_id = uuid.uuid4().hex
    to_queue = []
    with results.sessions.begin() as session:
        now = utc(results.clock())
        rescore = Rescore(id=rescore_id, tenant=tenant_key(tenant),
                          created_at=now, qrels_version=qrels_version,
                          qrels_sha256=qrels_sha256, systems=json.dumps(systems))
        _lock_tenant(session, tenant)
        session.add(rescore)
        session.flush()
        queued, pending = _in_flight(session, tenant, qrels_sha256,
                                     None if horizon is None else now - horizon)
        # the columns planning reads, not whole results (their documents: R31b finding 9)
        rows = session.execute(
            select(Result.id, Result.qrels_sha256, Result.run_sha256,
                   Result.topic_metadata_sha256, Result.topic_metadata_version, System.name)
            .join(System, System.pk == Result.system_pk)
            .where(System.tenant == tenant_key(tenant), System.name.in_(systems),
                   Result.rescores.is_(None))
            .order_by(System.name, Result.created_at, Result.pk)).all()
        order = {name: i for i, name in enumerate(systems)}
        rows.sort(key=lambda r: order[r.name])  # stable: oldest first within a system
        for position, result in enumerate(rows):
            system = result.name
            item = RescoreItem(rescore_pk=rescore.pk, position=position, result_id=result.id,
                               system=system, state=QUEUED)
            reason = _skip_reason(result, qrels_sha256)
            done = None if reason else _rescored_under(session, result.id, qrels_sha256)
            if reason:
                item.state, item.reason = SKIPPED, reason
            elif done:
                item.state, item.new_result_id = DONE, done
            elif result.id in pending:  # queued by another re-score: that job does it
                item.job_id = pending[result.id]
            else:
                item.job_id = f"rescore-{rescore_id}-{position}"
                to_queue.append({"position": position, "result_id": result.id,
                                 "job_id": item.job_id})
            session.add(item)
        if to_queue and max_queued is not None and queued + len(to_queue) > max_queued:
            raise TooManyQueued(queued, len(to_queue), max_queued)
    return rescore_id, to_queue


def progress(results, tenant: str | None, rescore_id: str) -> dict | None:
    """A re-score as ``GET /v1/rescores/{id}`` shows it (None: no such re-score of the
    tenant): its qrels, systems, counts (total, queued, done, failed, skipped) and items."""
    with results.sessions() as session:
        rescore = session.scalar(select(Rescore).where(Rescore.id == rescore_id,
                                                       Rescore.tenant == tenant_key(tenant)))
        if rescore is None:
            return None
        items = session.scalars(select(RescoreItem).where(
            RescoreItem.rescore_pk == rescore.pk).order_by(RescoreItem.position)).all()
        waiting = [i.result_id for i in items if i.state == QUEUED]
        recorded = dict(session.execute(select(Result.rescores, Result.id).where(
            Result.tenant == tenant_key(tenant), Result.rescores.in_(waiting),
            Result.qrels_sha256 == rescore.qrels_sha256)).all()) if waiting else {}
    if recorded:  # recorded by its job, or by the job of another re-score that queued it
        with results.sessions.begin() as session:
            for item in items:
                if item.state == QUEUED and item.result_id in recorded:
                    item.state, item.new_result_id = DONE, recorded[item.result_id]
                    session.execute(update(RescoreItem).where(
                        RescoreItem.rescore_pk == rescore.pk,
                        RescoreItem.position == item.position, RescoreItem.state == QUEUED)
                        .values(state=DONE, new_result_id=item.new_result_id))
    counts = {state: sum(i.state == state for i in items)
              for state in (QUEUED, DONE, FAILED, SKIPPED)}
    return {"id": rescore.id, "qrels_id": rescore.qrels_version,
            "qrels_sha256": rescore.qrels_sha256, "systems": json.loads(rescore.systems),
            "created_at": iso(rescore.created_at),
            "state": "running" if counts[QUEUED] else "finished",
            "total": len(items), **counts,
            "new_result_ids": [i.new_result_id for i in items if i.new_result_id],
            "items": [{"result_id": i.result_id, "system": i.system, "state": i.state,
                       "reason": i.reason, "new_result_id": i.new_result_id}
                      for i in items]}


def _finish_item(results, rescore_id: str, position: int, state: str, *,
                 new_result_id: str | None = None, reason: str | None = None,
                 if_queued: bool = False) -> None:
    """Mark an item ``state``; with ``if_queued``, only while it is still queued (what the
    queue says of it may be older than what its jobs wrote since)."""
    with results.sessions.begin() as session:
        rescore_pk = session.scalar(select(Rescore.pk).where(Rescore.id == rescore_id))
        if rescore_pk is None:  # deleted meanwhile
            return
        where = [RescoreItem.rescore_pk == rescore_pk, RescoreItem.position == position]
        if if_queued:
            where.append(RescoreItem.state == QUEUED)
        session.execute(update(RescoreItem).where(*where)
                        .values(state=state, new_result_id=new_result_id, reason=reason))


def abandon(results, rescore_id: str, positions: list[int], reason: str) -> None:
    """Fail the items at ``positions`` still queued, with ``reason`` (their jobs could not be
    queued: nothing would ever run them, and the re-score's id was never answered, so no GET
    would queue them again). A job queued before the failure still finishes its item."""
    with results.sessions.begin() as session:
        rescore_pk = session.scalar(select(Rescore.pk).where(Rescore.id == rescore_id))
        if rescore_pk is None or not positions:
            return
        session.execute(update(RescoreItem).where(
            RescoreItem.rescore_pk == rescore_pk, RescoreItem.state == QUEUED,
            RescoreItem.position.in_(positions)).values(state=FAILED, reason=reason))


def _fail(results, wire: dict, reason: str) -> dict:
    _finish_item(results, wire["rescore_id"], wire["position"], FAILED, reason=reason)
    return {"problem": {"status": 422, "title": "Cannot re-score", "detail": reason}}


def _prepare(qrels_store, results, wire: dict):
    """What a re-score job needs before it evaluates: ``(original, qrels, meta, kept run
    digest, engine options, None)``, or ``(…, outcome)`` when it is over already (the item
    done with a result recorded before, or failed with the reason)."""
    from .store import NotFound

    tenant, original_id = wire["tenant"], wire["result_id"]
    # a late duplicate (queued again after its result was recorded) ends here, before the
    # original's document and the whole qrels are read: the re-score row has the digest
    with results.sessions() as session:
        planned = session.scalar(select(Rescore.qrels_sha256).where(
            Rescore.id == wire["rescore_id"]))
        done = None if planned is None else _rescored_under(session, original_id, planned)
    if done is not None:
        _finish_item(results, wire["rescore_id"], wire["position"], DONE, new_result_id=done)
        return None, None, None, None, None, {"result_id": done}
    original = results.get(tenant, original_id)
    if original is None:
        return None, None, None, None, None, _fail(
            results, wire, f"result {original_id} was deleted before it was re-scored")
    try:
        qrels, meta = qrels_store.scoped(tenant).load_qrels(wire["qrels_ref"])
    except NotFound as exc:
        return None, None, None, None, None, _fail(results, wire,
                                                   f"qrels {wire['qrels_ref']}: {exc}")
    with results.sessions() as session:
        done = _rescored_under(session, original_id, meta["sha256"])
        run_sha256 = session.scalar(select(Result.run_sha256).where(Result.id == original_id))
    if done is not None:
        _finish_item(results, wire["rescore_id"], wire["position"], DONE, new_result_id=done)
        return None, None, None, None, None, {"result_id": done}
    provenance = original["document"].get("provenance") or {}
    options = provenance.get("options") or {}
    if options.get("zscores"):
        return None, None, None, None, None, _fail(
            results, wire, "it was evaluated with z-scores (-Z), whose means are not kept")
    engine_options = {k: options[k] for k in OPTIONS if k in options}
    engine_options["profile"] = rescore_profile(options, meta)  # not merely the recorded one
    if options.get("topic_metadata") is not None:  # segments (issue #28): the same version
        mapping, problem = _topic_metadata(results, tenant, provenance)
        if problem is not None:
            return None, None, None, None, None, _fail(results, wire, problem)
        engine_options["topic_metadata"] = mapping
    return original, qrels, meta, run_sha256, engine_options, None


def _topic_metadata(results, tenant: str | None, provenance: dict) -> tuple[dict | None,
                                                                             str | None]:
    """(the canonical mapping, None) of the stored topic metadata version a result was
    evaluated with (``provenance.topic_metadata_version``, ``id@version``), so its re-score
    has the same segments and weights; (None, the reason) when it cannot be had: inline
    metadata (not kept), or the version deleted or not the one recorded (its digest)."""
    from .store import NotFound
    from .topic_metadata_db import TopicMetadataStore

    ref = provenance.get("topic_metadata_version")
    if not ref:
        return None, INLINE_METADATA
    try:
        mapping, meta = TopicMetadataStore(results.engine).load(tenant, ref)
    except NotFound as exc:
        return None, f"topic metadata {ref}: {exc}"
    recorded = (provenance.get("options") or {}).get("topic_metadata") or {}
    if recorded.get("sha256") not in (None, meta.get("sha256")):
        return None, (f"topic metadata {ref} is not the metadata the result was evaluated "
                      "with (another digest)")
    return mapping, None


def _record_rescore(results, wire: dict, original: dict, doc: dict, meta: dict,
                    run_sha256: str | None) -> dict:
    """Record ``doc`` (the evaluation of ``original``'s kept run under the qrels of ``meta``)
    as its re-score, at its time, and mark the item done: ``{"result_id"}``. A re-score of it
    under these qrels recorded meanwhile (another job) is the item's result instead."""
    from .kept_runs import KeptRunGone

    tenant, original_id = wire["tenant"], wire["result_id"]
    sha, version = meta["sha256"], f"{meta['id']}@{meta['version']}"
    doc["provenance"]["rescores"] = original_id
    record = {"system": original["system"], "label": original["label"],
              "commit": original["commit"], "tags": original["tags"]}
    try:
        summary = results.record(tenant, record, doc, run_sha256=run_sha256,
                                 created_at=datetime.fromisoformat(
                                     original["created_at"].replace("Z", "+00:00")),
                                 rescores=original_id)
    except IntegrityError:  # recorded meanwhile (another job under the same qrels)
        with results.sessions() as session:
            done = _rescored_under(session, original_id, sha)
        if done is None:
            raise
        summary = {"id": done}
    except KeptRunGone:  # the original and its run deleted since the run was read
        return _fail(results, wire, "its kept run was deleted before it was re-scored")
    _finish_item(results, wire["rescore_id"], wire["position"], DONE,
                 new_result_id=summary["id"])
    log.info("re-scored", extra={"event": "rescored", "result_id": original_id,
                                 "new_result_id": summary["id"], "qrels_version": version})
    return {"result_id": summary["id"]}


def rescore_one(qrels_store, results, wire: dict, connection=None) -> dict:
    """The work of one re-scoring job (``wire``: ``tenant``, ``rescore_id``, ``position``,
    ``result_id``, ``qrels_ref``, ``job_id``, and the queue's ``settings``): the original
    result's kept run evaluated against the stored qrels ``qrels_ref`` with the measures and
    options the original was evaluated with, recorded as a new result of the same system with
    the original's time, label, commit and tags, naming the result it re-scores; then its item
    marked done. The kept run is read as columns (``KeptRuns.read``), never as text. One of
    at least SHARD_MIN_BYTES / 16 rows (its TREC text would be at least SHARD_MIN_BYTES: a
    canonical line is at least 16 bytes) is cut into SHARDS Arrow IPC pieces at topic
    boundaries (:func:`column_pieces`) and evaluated as any large queued evaluation is (a shard job
    per piece on any worker, then :func:`rescore_combine`), when the job runs on RQ
    (``connection``: its Redis). A result re-scored under these qrels already is not recorded
    again (a retried job, two re-scores racing): its id is the item's. Input that cannot be
    re-scored (the result or its run deleted, the qrels gone, an engine error) marks the
    item failed with the reason. Returns ``{"result_id"}``, ``{"shards"}`` or
    ``{"problem"}``."""
    import cranfield
    from cranfield.measures.budget import evaluation_budget
    from cranfield.reports.result_document import evaluation_document

    from .kept_runs import KeptRuns
    from .store import NotFound
    from .tasks import name_topic_metadata, problem_of

    original, qrels, meta, run_sha256, options, over = _prepare(qrels_store, results, wire)
    if over is not None:
        return over
    tenant, document = wire["tenant"], original["document"]
    measures = [m["key"] for m in document.get("measures") or []]
    runs = KeptRuns(results)
    settings = wire.get("settings") or {}
    try:
        info = runs.info(tenant, run_sha256) if run_sha256 else None
        if info is None:
            raise NotFound(run_sha256)
        run = runs.read(tenant, run_sha256)  # as columns: no TREC text is made (issue #31)
        # its TREC text would be at least SHARD_MIN_BYTES (a canonical line is >= 16 bytes)
        if (connection is not None and settings.get("shards", 1) > 1
                and info["rows"] * 16 >= settings.get("shard_min_bytes", 0)):
            pieces = column_pieces(run, settings["shards"])
            if len(pieces) > 1:  # (one topic is one piece: evaluated here)
                del run
                return _enqueue_shards(connection, qrels_store, wire, pieces, measures,
                                       options, run_sha256)
            del pieces
        bounds = settings.get("work_bounds") or {}
        with evaluation_budget(bounds.get("max_measure_instances"),
                               bounds.get("max_evaluation_values"),
                               values_name="MAX_QUEUED_EVALUATION_VALUES",
                               max_segments=bounds.get("max_segments")):
            ev = cranfield.evaluate(qrels, run, measures, **options)
    except NotFound:
        return _fail(results, wire, "its kept run was deleted before it was re-scored")
    except cranfield.CranfieldError as exc:
        return _fail(results, wire, problem_of(exc).get("detail") or str(exc))
    # the run as the original named it (its digest as sent); the kept copy is run_sha256
    prov = document.get("provenance") or {}
    doc = name_topic_metadata(evaluation_document(
        ev, {"per_topic": True}, prov.get("run_sha256") or run_sha256, meta["sha256"], None,
        f"{meta['id']}@{meta['version']}"), prov.get("topic_metadata_version"))
    return _record_rescore(results, wire, original, doc, meta, run_sha256)


#: the step that merges a sharded re-score's pieces and records it
RESCORE_COMBINE_FUNCTION = "worker.jobs.rescore_combine_job"


#: how a kept run's shards are compressed on the queue (an Arrow IPC stream's buffers): M's
#: 7M rows in 4 pieces, 188 MB uncompressed, 112 MB lz4, 82 MB zstd, read back at about the
#: same speed
PIECE_COMPRESSION = "zstd"


def topic_cuts(topic_index, parts: int) -> list[int]:
    """Row offsets ``[0, ..., n]`` cutting rows grouped by topic, in ascending topic code
    (a kept run's: canonical order), into about ``parts`` pieces of similar size, only where
    the topic changes: each cut at the topic start nearest its target, so pieces hold
    disjoint topics (one topic, one piece)."""
    import numpy as np

    n = len(topic_index)
    starts = np.flatnonzero(np.diff(np.asarray(topic_index))) + 1  # rows opening a topic
    cuts = [0]
    for k in range(1, parts):
        target, i = k * n // parts, int(np.searchsorted(starts, k * n // parts))
        near = [int(starts[j]) for j in (i - 1, i) if 0 <= j < len(starts)]
        best = min(near, key=lambda at: abs(at - target)) if near else 0
        if best > cuts[-1]:
            cuts.append(best)
    return [*cuts, n] if n else [0]


def column_pieces(run, parts: int) -> list[bytes]:
    """A kept run (``KeptRuns.read``'s :class:`cranfield.inputs.run_qrels.Run`: rows in
    canonical order) cut by topic (:func:`topic_cuts`) into the Arrow IPC streams a shard job
    reads (``cranfield.read_run`` tells them by their magic bytes; the columns of
    ``cranfield.inputs.columnar.run_from_table``: ``topic`` dictionary-encoded, ``docid``,
    ``score``, ``runid``), :data:`PIECE_COMPRESSION`-compressed. The values are the kept
    run's as stored: no text is made or parsed, so every score and docid is the run's."""
    import numpy as np
    import pyarrow as pa

    codes = np.asarray(run.topic_index)
    cuts = topic_cuts(codes, parts)
    topics = pa.array(run.topics, pa.string())
    runid = pa.array([run.runid], pa.string())
    options = pa.ipc.IpcWriteOptions(compression=PIECE_COMPRESSION)
    pieces = []
    for start, end in zip(cuts, cuts[1:], strict=False):
        first, last = int(codes[start]), int(codes[end - 1])
        table = pa.table({
            "topic": pa.DictionaryArray.from_arrays(
                pa.array((codes[start:end] - first).astype(np.int32)),
                topics.slice(first, last - first + 1)),
            "docid": run.docids.slice(start, end - start),
            "score": pa.array(run.scores[start:end], pa.float64()),
            "runid": pa.DictionaryArray.from_arrays(
                pa.array(np.zeros(end - start, np.int32)), runid)})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
            writer.write_table(table)
        pieces.append(sink.getvalue().to_pybytes())
    return pieces


def _shard_spec(wire: dict, measures: list[str], options: dict, run_key: str | None, **more):
    from .contract import CombineJob, QrelsInput, ShardJob

    kind = CombineJob if "shard_ids" in more else ShardJob
    return kind(measures=measures, options=dict(options, qrels_format="qrels"),
                qrels=QrelsInput(ref=wire["qrels_ref"]), per_topic=True,
                tenant=wire["tenant"], run_key=run_key, job_id=wire["job_id"],
                table_bounds=(wire.get("settings") or {}).get("table_bounds"),
                work_bounds=(wire.get("settings") or {}).get("work_bounds"), **more)


def _enqueue_shards(connection, store, wire: dict, pieces: list, measures: list[str],
                    options: dict, run_sha256: str) -> dict:
    """A large kept run's re-score as any large queued evaluation: its pieces, cut at topic
    boundaries from its columns (:func:`column_pieces`: Arrow IPC, ``run_format`` arrow),
    each a blob and a shard job (``backend.contract.SHARD_FUNCTION``), and a combine step
    (:data:`RESCORE_COMBINE_FUNCTION`) RQ runs once they have all finished."""
    from .contract import QUEUE, SHARD_FUNCTION, job_options
    from .telemetry import metered_queue

    settings = wire["settings"]
    queue = metered_queue(QUEUE, connection)
    # (a finished shard's result outlives its siblings' wait and their attempts, as
    # in_flight_horizon counts them: a recovery reading the combine step waiting finds it)
    common, shard_opts = job_options(settings["job_timeout"], settings["result_ttl"],
                                     settings["queued_ttl"])
    keys, shard_ids = [], []
    for i, piece in enumerate(pieces):
        keys.append(store.put_blob(f"run-{uuid.uuid4().hex}", bytes(piece),
                                   settings["input_ttl"]))
        shard_ids.append(f"{wire['job_id']}-shard-{i}")
        spec = _shard_spec(wire, measures, options, keys[-1], shard=i, run_format="arrow")
        queue.enqueue_call(SHARD_FUNCTION, args=(spec.to_wire(),), job_id=shard_ids[-1],
                           **shard_opts)
    combine = dict(wire, shard_ids=shard_ids, shard_keys=keys, run_sha256=run_sha256)
    queue.enqueue_call(RESCORE_COMBINE_FUNCTION, args=(combine,),
                       job_id=f"{wire['job_id']}-combine", depends_on=shard_ids,
                       meta=JOB_META, **common)
    return {"shards": len(pieces)}


def rescore_combine(store, results, wire: dict, shards: list[dict | None]) -> dict:
    """A sharded re-score's last step: the shards' outcomes merged as a sharded evaluation's
    combine step merges them (``backend.tasks``), the document recorded as the re-score
    (:func:`_record_rescore`), the pieces' blobs dropped."""
    from .tasks import combine_shards, drop_inputs

    try:
        original, _, meta, run_sha256, options, over = _prepare(store, results, wire)
        if over is not None:
            return over
        if any(s is None for s in shards):
            return _fail(results, wire, "a shard's result expired before the combine step")
        measures = [m["key"] for m in original["document"].get("measures") or []]
        prov = original["document"].get("provenance") or {}
        spec = _shard_spec(wire, measures, options, None, shard_ids=wire["shard_ids"],
                           shard_keys=wire["shard_keys"],
                           run_sha256=prov.get("run_sha256") or run_sha256,
                           topic_metadata_version=prov.get("topic_metadata_version"))
        outcome = combine_shards(store, spec, shards)
        if "problem" in outcome:
            return _fail(results, wire, outcome["problem"].get("detail") or "cannot combine")
        return _record_rescore(results, wire, original, outcome["result"], meta, run_sha256)
    finally:
        drop_inputs(store, wire["shard_keys"])


# the embedded service (no Redis) runs re-scores here, one at a time, as its other jobs;
# the job ids it was given (a process that started after them lost them)
_EMBEDDED = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cranfield-rescore")
_EMBEDDED_IDS: set[str] = set()


def settings_for(backend, config: dict) -> dict:
    """What a re-score job carries of the app's settings: how a large run is sharded
    (SHARDS, SHARD_MIN_BYTES), the queue's timeouts and TTLs for its shard jobs, and the
    bounds and budgets a queued evaluation is held to."""
    from .config import work_bounds
    from .contract import table_bounds

    return {"shards": config["SHARDS"], "shard_min_bytes": config["SHARD_MIN_BYTES"],
            "job_timeout": config["JOB_TIMEOUT"], "result_ttl": config["RESULT_TTL"],
            "queued_ttl": config["QUEUED_TTL"], "input_ttl": config["INPUT_TTL"],
            "table_bounds": table_bounds(config), "work_bounds": work_bounds(config)}


def enqueue(backend, config: dict, wires: list[dict], results) -> None:
    """One job per item: on RQ by dotted path (JOB_TIMEOUT, QUEUED_TTL, RESULT_TTL, retried
    twice if its worker dies), carrying references and the settings it works within
    (:func:`settings_for`); in the embedded service, on a thread of this process."""
    settings = settings_for(backend, config)
    wires = [dict(wire, settings=settings) for wire in wires]
    if getattr(backend, "kind", None) != "redis":
        for wire in wires:
            _EMBEDDED_IDS.add(wire["job_id"])
            _EMBEDDED.submit(_embedded, backend.store, results, wire)
        return
    from .contract import job_options

    options, _ = job_options(config["JOB_TIMEOUT"], config["RESULT_TTL"], config["QUEUED_TTL"])
    for wire in wires:
        backend.queue.enqueue_call(RESCORE_FUNCTION, args=(wire,), job_id=wire["job_id"],
                                   meta=JOB_META, **options)


def wait_embedded(timeout: float | None = None) -> None:
    """Return once every re-score job this process's embedded queue has been given so far
    has run: its one thread runs them in order, so a no-op given after them ends after
    them (what a caller waits on instead of polling; TimeoutError past ``timeout``)."""
    _EMBEDDED.submit(lambda: None).result(timeout)


def _embedded(store, results, wire: dict) -> None:
    try:
        rescore_one(store, results, wire)
    except Exception as exc:  # a bug: the item says so rather than stay queued
        log.exception("re-score crashed")
        _finish_item(results, wire["rescore_id"], wire["position"], FAILED,
                     reason=f"{type(exc).__name__}: {exc}")
    finally:  # its item is finished: an item still queued under this id is another's
        _EMBEDDED_IDS.discard(wire["job_id"])



#: RQ states in which a job will still run (or is running). RQ 3 added two of them:
#: ``ready_to_enqueue``, a dependent whose dependencies have all finished (the combine step
#: once its last shard has: the worker commits the shard's success and moves it there in one
#: transaction, then pushes it onto the queue in a second step, or leaves it to a worker's
#: maintenance when that step loses a race), and ``rate_limited``, a job waiting for a slot
#: of its rate limit. Not counted here, a poll in that window judged a live item lost and
#: queued it again (issue #31).
_PENDING = ("created", "queued", "started", "deferred", "scheduled", "ready_to_enqueue",
            "rate_limited")
#: RQ states in which a job is over: it will not run (again). Every RQ state is one or the
#: other (tests/integration/test_rescore_recovery_race.py holds RQ's list to these two).
_ENDED = ("finished", "failed", "stopped", "canceled")


def _status(job) -> str | None:
    return None if job is None else getattr(job.get_status(refresh=False), "value", None)


def _failure(job) -> str:
    """The last line of a job's error (its latest outcome's), as an item's reason."""
    from rq.results import Result

    latest = job.latest_result()
    text = latest.exc_string if latest is not None and latest.type == Result.Type.FAILED \
        else None
    return ((text or "the worker failed").strip().splitlines() or ["the worker failed"])[-1]


def on_queue(connection, job_id: str, fetched: tuple | None = None) -> tuple[str, str | None]:
    """Where a queued item's jobs stand on RQ (``job_id``: its re-score job's id):
    ``("pending", None)`` while some job of it will still run: the re-score job itself, or,
    once that job cut the kept run into shards, its combine step (``{job_id}-combine``),
    queued or running, or waiting for shards that are all still there and none failed for
    good; ``("failed", reason)`` when one of them failed for good (retries spent: the
    re-score job, a shard or the combine step); ``("lost", None)`` when nothing of it is left
    to run: Redis restarted empty, or lost the combine step or a shard it waits for (a
    restart while the re-score job ran, which its worker then saved as finished; a deferred
    combine step expired), so the item must be queued again whole. ``fetched``: the job and
    its combine step read already (:func:`on_queue_many`)."""
    from rq.job import Job

    first, combine = fetched or Job.fetch_many([job_id, f"{job_id}-combine"],
                                               connection=connection)
    state = _status(first)
    if state in _PENDING:
        return "pending", None
    if state == "failed":
        return "failed", _failure(first)
    state = _status(combine)
    if state == "failed":
        return "failed", _failure(combine)
    if state in _PENDING and state != "deferred":
        return "pending", None
    if state == "deferred":
        shards = Job.fetch_many(sorted(combine.dependency_ids), connection=connection)
        failed = [j for j in shards if _status(j) == "failed"]
        if failed:
            return "failed", _failure(failed[0])
        if shards and all(_status(j) in (*_PENDING, "finished") for j in shards):
            return "pending", None
    return "lost", None


def on_queue_many(connection, job_ids: list[str]) -> list[tuple[str, str | None]]:
    """:func:`on_queue` of each item's job id, the jobs and combine steps read in one round
    trip (a re-score has up to MAX_RESCORE_RESULTS items; a GET asks for them all)."""
    from rq.job import Job

    jobs = Job.fetch_many([i for j in job_ids for i in (j, f"{j}-combine")],
                          connection=connection)
    return [on_queue(connection, j, (jobs[2 * k], jobs[2 * k + 1]))
            for k, j in enumerate(job_ids)]


def resume(backend, config: dict, results, tenant: str | None, doc: dict) -> int:
    """Queue again the items of the re-score ``doc`` (:func:`progress`'s) still queued that
    the queue no longer knows anything left to run of (:func:`on_queue`: Redis restarted
    empty before a job ran, while its shards ran or its combine step waited; or this
    embedded process is not the one they were given to): each is queued again whole, its
    re-score job first (a result it records is unique per original and qrels digest, so a
    late duplicate of a lost job records nothing). An item one of whose jobs failed for good
    is marked failed with the reason. The database says what is left to do. Returns how
    many were queued again. ``GET /v1/rescores/{id}`` runs it through :func:`recover` (one
    poll at a time, at most once per RESCORE_RECOVERY_INTERVAL)."""
    with results.sessions() as session:
        rescore_pk = session.scalar(select(Rescore.pk).where(Rescore.id == doc["id"]))
        items = session.execute(select(RescoreItem.position, RescoreItem.result_id,
                                       RescoreItem.job_id).where(
            RescoreItem.rescore_pk == rescore_pk, RescoreItem.state == QUEUED)).all()
    if getattr(backend, "kind", None) == "redis":
        lost = []
        states = on_queue_many(backend.redis, [i.job_id for i in items])
        for i, (state, reason) in zip(items, states, strict=True):
            if state == "lost":
                lost.append(i)
            elif state == "failed":  # its retries spent on errors (a bug, the database down)
                _finish_item(results, doc["id"], i.position, FAILED, reason=reason,
                             if_queued=True)
        if lost:  # a job finishes its item before RQ marks it finished: read the items again
            with results.sessions() as session:
                still = set(session.scalars(select(RescoreItem.position).where(
                    RescoreItem.rescore_pk == rescore_pk, RescoreItem.state == QUEUED,
                    RescoreItem.position.in_([i.position for i in lost]))))
            lost = [i for i in lost if i.position in still]
    else:
        lost = [i for i in items if i.job_id not in _EMBEDDED_IDS]
    wires = [{"tenant": tenant, "rescore_id": doc["id"], "qrels_ref": doc["qrels_id"],
              "position": i.position, "result_id": i.result_id, "job_id": i.job_id}
             for i in lost]
    if wires:
        log.warning("re-score jobs lost by the queue: queued again", extra={
            "event": "rescore_resumed", "rescore_id": doc["id"], "jobs": len(wires)})
        enqueue(backend, config, wires, results)
    return len(wires)


#: seconds a re-score's recovery holds its lock at most when its process dies before
#: releasing it (a request's longest: gunicorn's default CRANFIELD_TIMEOUT); released at once
#: when the recovery ends, but for what is left of RESCORE_RECOVERY_INTERVAL
RECOVERY_LOCK_S = 120

# the lock's release: only by its holder (its token), kept until the interval is over
_RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
end
local left = tonumber(ARGV[2])
if left > 0 then
    redis.call('PEXPIRE', KEYS[1], left)
else
    redis.call('DEL', KEYS[1])
end
return 1
"""


def recovery_key(rescore_id: str) -> str:
    """The Redis key a re-score's recovery (:func:`recover`) holds while it runs and for the
    rest of ``RESCORE_RECOVERY_INTERVAL`` from its start."""
    return redis_keys.rescore_recovery(rescore_id)


def recover(backend, config: dict, results, tenant: str | None, doc: dict) -> int | None:
    """:func:`resume` for ``GET /v1/rescores/{id}``, at most one at a time per re-score and
    at most once per ``RESCORE_RECOVERY_INTERVAL`` seconds (its start to the next one's), so
    that polling costs what reading the progress costs: a lock taken with SET NX on
    :func:`recovery_key` (its token, an expiry of :data:`RECOVERY_LOCK_S` at most in case its
    process dies) and, once the recovery is over, left to expire when the interval is.
    Concurrent polls (threads, API processes) cannot both queue the same lost item again;
    a poll that does not get the lock only reads the progress. Returns how many items were
    queued again, or None when another recovery holds the lock or ran within the interval.
    The embedded service (no Redis) resumes at every poll, as it always has: its jobs are
    in its own process."""
    if getattr(backend, "kind", None) != "redis":
        return resume(backend, config, results, tenant, doc)
    interval_ms = int(config["RESCORE_RECOVERY_INTERVAL"]) * 1000
    key, token = recovery_key(doc["id"]), uuid.uuid4().hex
    if not backend.redis.set(key, token, nx=True,
                             px=max(interval_ms, RECOVERY_LOCK_S * 1000)):
        return None
    started = time.monotonic()
    try:
        return resume(backend, config, results, tenant, doc)
    finally:
        left = interval_ms - int((time.monotonic() - started) * 1000)
        try:
            backend.redis.eval(_RELEASE, 1, key, token, left)
        except Exception:  # Redis gone meanwhile: the lock's expiry frees it
            log.warning("could not release a re-score's recovery lock", exc_info=True,
                        extra={"event": "rescore_recovery_unlocked",
                               "rescore_id": doc["id"]})


# --------------------------------------------------------------------------------------------
# Gates compare like with like: a system's pinned baseline under the candidate's qrels.
# --------------------------------------------------------------------------------------------

class BaselineNotRescored(LookupError):
    """The pinned baseline was evaluated under other qrels than the comparison's, and no
    re-score of it under those is recorded; the message says how to make one."""


def baseline_under(results, tenant: str | None, system: str, pinned: dict,
                   qrels_sha256: str | None, qrels_name: str | None) -> dict:
    """The result a gate compares with as ``system``'s baseline when the comparison is under
    the qrels of ``qrels_sha256`` (named ``qrels_name``): the pinned baseline ``pinned`` (a
    summary) itself when it was evaluated under them (or the comparison's qrels are not known
    before its inputs are read: None), else the same night under them: when the pinned
    baseline is itself a re-score, the result it re-scores (re-scores always name the
    original) if that was evaluated under them, else the night's re-score under them; none
    recorded: :class:`BaselineNotRescored`."""
    if qrels_sha256 is None or pinned.get("qrels_sha256") == qrels_sha256:
        return pinned
    night = original_of(results, tenant, pinned["id"])
    if night is not None and night.get("qrels_sha256") == qrels_sha256:
        return night
    found = rescored_result(results, tenant, (night or pinned)["id"], qrels_sha256)
    if found is not None:
        return found
    was = pinned.get("qrels_version") or f"qrels sha256 {str(pinned.get('qrels_sha256'))[:12]}"
    target = qrels_name or f"qrels sha256 {qrels_sha256[:12]}"
    how = (f'POST /v1/systems/{system}/rescore with {{"qrels_id": "{qrels_name}"}}'
           if qrels_name else f"POST /v1/systems/{system}/rescore with the stored qrels")
    raise BaselineNotRescored(
        f"the pinned baseline of system {system} (result {pinned['id']}, "
        f"{pinned.get('label')}) was evaluated under {was}, this comparison is under "
        f"{target}: their scores are not comparable. Re-score the baseline under {target} "
        f"({how}), then gate again; or pin a baseline evaluated under {target}")
