"""``GET /v1/qrels/{qrels_id}/diff?from=V1&to=V2``: two versions of stored qrels compared
(issue #31). Per changed topic, the judgments added, removed and regraded
(:func:`cranfield.inputs.qrels_diff.diff_qrels`), the totals, the topics added and removed,
and the pool depth each version covers (its ``pool_depth`` as put, else null with the
reason). ``from`` defaults to the version of ``to``'s kind put before ``to`` (judgment
groups and the consensus derived from them may alternate in one id), ``to`` to the latest.
JSON, or
``text/plain`` as ``cranfield qrels diff`` prints it (:mod:`cranfield.reports.qrels_diff_text`).

Bounds: the changed topics come in pages (``offset``, ``limit`` <= MAX_PAGE_ITEMS, as every
listing); the versions compared were held to MAX_TOPICS and the body limit when stored, and
the diff is linear in their judgments. The diffs of the last few version pairs are kept per
process (by their digests), so paging does not compute one again.

Errors: 404 naming the id, or the parameter (``from``, ``to``) whose version the id lacks;
another tenant's id is unknown (404); 400 for a version that is not 16 hex digits; 422 when
the two versions are of different kinds or are preferences. When no version was put before
``to``, ``from`` is ``to`` (the diff is empty)."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict

import orjson
from flask import Blueprint, Response, request

from backend.store import StoreError

from .negotiation import negotiate
from .paging import bad_parameter, next_page, page
from .problems import Problem
from .qrels import ID_PATTERN, store

bp = Blueprint("qrels_diff", __name__, url_prefix="/v1/qrels")
VERSION = re.compile(r"[0-9a-f]{16}")
#: how many diffs (version pairs) a process keeps, for the pages after the first
CACHED_DIFFS = 4
_cache: OrderedDict[tuple[str, str, str], dict] = OrderedDict()
_lock = threading.Lock()


def _not_found(detail: str, name: str) -> Problem:
    return Problem(404, "Not Found", detail, kind="not-found", errors={name: [detail]})


def _kind(meta: dict) -> str:
    """The kind a diff compares a version as: plain qrels, subtopic qrels, judgment groups
    or a preference kind (refused by the engine)."""
    fmt = meta.get("qrels_format", "qrels")
    return "subtopics" if fmt == "qrels" and meta.get("diversity") else fmt


def _version(name: str) -> str | None:
    value = request.args.get(name)
    if value is not None and not VERSION.fullmatch(value):
        raise bad_parameter(name, "a version of the qrels: 16 hexadecimal digits "
                            "(as PUT's ETag and GET's versions name it)")
    return value


def _versions(qrels_id: str) -> tuple[str, str, list[str]]:
    """(from, to, the id's versions in put order): the parameters, or their defaults."""
    try:
        meta = store().meta(qrels_id)
    except StoreError:
        raise _not_found(f"no qrels {qrels_id!r}", "qrels_id") from None
    order = meta["versions"]
    old, new = _version("from"), _version("to")
    for name, value in (("from", old), ("to", new)):
        if value is not None and value not in order:
            raise _not_found(f"{name}: no version {value!r} of qrels {qrels_id!r}", name)
    new = new or meta["latest"]
    if old is None:
        # the version of ``to``'s kind put before ``to`` was last put (a version put again
        # comes back; a consensus stored into its judged qrels' id is compared with the
        # consensus before it, not with the judgment groups between them)
        at = len(order) - 1 - order[::-1].index(new)
        kind = _kind_of(qrels_id, new)
        # (the first version put: compared with itself, nothing changed)
        old = next((v for v in dict.fromkeys(reversed(order[:at]))
                    if v != new and _kind_of(qrels_id, v) == kind), new)
    return old, new, order


def _kind_of(qrels_id: str, version: str) -> str | None:
    """:func:`_kind` of a stored version (None: deleted since the id's metadata was read)."""
    try:
        return _kind(store().meta(qrels_id, version))
    except StoreError:
        return None


def _loaded(qrels_id: str, version: str, name: str):
    try:
        return store().load_qrels(f"{qrels_id}@{version}")
    except StoreError:  # deleted since its metadata was read
        raise _not_found(f"{name}: no version {version!r} of qrels {qrels_id!r}",
                         name) from None


def _diff(qrels_id: str, old: str, new: str) -> tuple[dict, dict, dict]:
    """(the engine's diff, the from side, the to side), computed once per version pair."""
    from cranfield.inputs.qrels_diff import diff_qrels
    from cranfield.reports.qrels_diff_text import side

    before, meta_old = _loaded(qrels_id, old, "from")
    after, meta_new = _loaded(qrels_id, new, "to")
    kinds = _kind(meta_old), _kind(meta_new)
    if kinds[0] != kinds[1]:
        raise Problem(422, "Invalid request", f"from ({old}) holds {kinds[0]} judgments, to "
                      f"({new}) {kinds[1]}: versions of different kinds are not compared",
                      kind="invalid-request", errors={"to": [f"{kinds[1]}, not {kinds[0]}"]})
    key = (meta_old["sha256"], meta_new["sha256"], kinds[0])
    with _lock:
        diff = _cache.get(key)
        if diff is not None:
            _cache.move_to_end(key)
    if diff is None:
        diff = diff_qrels(before, after, kinds[0])  # a refused kind: the error handler's 422
        with _lock:
            _cache[key] = diff
            while len(_cache) > CACHED_DIFFS:
                _cache.popitem(last=False)
    sides = []
    for version, meta in ((old, meta_old), (new, meta_new)):
        sides.append(side(f"{qrels_id}@{version}", meta["judgments"], meta["topics"],
                          version=version, sha256=meta["sha256"],
                          pool_depth=meta.get("pool_depth")))
    return diff, sides[0], sides[1]


@bp.get("/<qrels_id>/diff")
def qrels_diff(qrels_id: str):
    """The judgments added, removed and regraded from one version of stored qrels to
    another, per changed topic (a page of them), with the totals and pool depths."""
    from cranfield.reports.qrels_diff_text import diff_document, format_diff

    fmt = negotiate(["application/json", "text/plain"])
    if not ID_PATTERN.fullmatch(qrels_id):
        raise _not_found(f"no qrels {qrels_id!r}", "qrels_id")
    offset, limit = page()
    old, new, _ = _versions(qrels_id)
    diff, before, after = _diff(qrels_id, old, new)
    link = next_page(f"/v1/qrels/{qrels_id}/diff", {"from": old, "to": new}, offset, limit,
                     len(diff["topics"]))
    doc = diff_document(diff, before, after, offset, limit, link)
    if fmt == "text/plain":
        return Response(format_diff(doc), mimetype="text/plain")
    return Response(orjson.dumps(doc), mimetype="application/json")
