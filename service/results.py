"""Recorded results (issue #18): ``GET /v1/systems``, ``GET /v1/systems/{name}/results``,
``GET|DELETE /v1/results/{result_id}``, ``GET /v1/results/{result_id}/comparison?with=ID``
(the comparison of two recorded results, where a trend's points lead),
``PUT|GET /v1/systems/{name}/baseline`` and ``GET /v1/systems/{name}/trend?measure=M`` (JSON,
or with ``Accept: text/html`` the trend page).

A result is recorded by ``POST /v1/evaluations`` with ``record`` (sync or queued). Systems
and results belong to the caller's tenant; another tenant's are answered 404, as if they did
not exist (as qrels and jobs are). A system is known while it has results."""

from __future__ import annotations

import difflib
import re
from datetime import UTC, datetime
from urllib.parse import quote, urlencode

import orjson
from flask import Blueprint, Response, current_app, request

from backend.store import NotFound

from .auth import current_tenant
from .evaluations import CONTROL
from .negotiation import negotiate
from .paging import bad_parameter, integer, next_page, page
from .problems import Problem
from .request_body import read_json_object

bp = Blueprint("results", __name__, url_prefix="/v1")
RESULT_ID = re.compile(r"^[0-9a-f]{32}$")
MAX_NAME = 200
MAX_TIME = 64       # since/until: ISO 8601 text
MAX_MEASURES = 500  # the measures query of a comparison by GET, in characters


def results_store():
    return current_app.extensions["results"]


def _json(doc, status: int = 200) -> Response:
    return Response(orjson.dumps(doc), status=status, mimetype="application/json")


def _check_result_id(result_id: str, field: str = "result_id") -> None:
    if not isinstance(result_id, str) or not RESULT_ID.match(result_id):
        raise Problem(422, "Invalid result id", f"{result_id!r} is not a result id",
                      kind="invalid-request", errors={field: ["32 hex digits (lower case), as "
                                                              "recorded.id gave it"]})


def check_system_name(name: str) -> None:
    """422 naming ``name`` for a system name no result can have (re-scoring uses it too)."""
    if not 1 <= len(name) <= MAX_NAME or CONTROL.search(name):
        raise Problem(422, "Invalid system name", f"{name!r} is not a system name",
                      kind="invalid-request", errors={"name": [
                          f"1-{MAX_NAME} printable characters"]})


def no_system(name: str) -> Problem:
    """The 404 for a system the tenant has no result of."""
    return Problem(404, "Not Found", f"no system {name!r} (none of your results is of it)",
                   kind="not-found")


def _no_result(result_id: str) -> Problem:
    return Problem(404, "Not Found", f"no result {result_id!r}", kind="not-found")


def _known_system(name: str) -> dict:
    """The tenant's system ``name`` as ``GET /v1/systems`` lists it; 404 if it has none."""
    check_system_name(name)
    system = results_store().system(current_tenant(), name)
    if system is None:
        raise no_system(name)
    return system


def _time(name: str) -> datetime | None:
    text = request.args.get(name)
    if text is None:
        return None
    if len(text) > MAX_TIME:
        raise bad_parameter(name, f"an ISO 8601 date or time of at most {MAX_TIME} "
                            "characters")
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise bad_parameter(name, "an ISO 8601 date or time (2026-11-23, "
                            "2026-11-23T06:00:00Z); no zone: UTC") from None
    try:  # the store compares in UTC: a time at the calendar's ends may have no UTC form
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except OverflowError:
        raise bad_parameter(name, f"{text!r} is outside years 1-9999 once converted to UTC; "
                            "give a time within them") from None


@bp.get("/systems")
def list_systems():
    """A page of the tenant's systems by name: results, latest, pinned baseline."""
    offset, limit = page()
    store, tenant = results_store(), current_tenant()
    items = store.systems(tenant, offset=offset, limit=limit)
    total = store.count_systems(tenant)
    return _json({"items": items, "total": total, "offset": offset, "limit": limit,
                  "next": next_page("/v1/systems", {}, offset, limit, total)})


@bp.get("/systems/<path:name>/results")
def list_results(name: str):
    """A page of the system's results, newest first; filters: since, until, tag,
    qrels_version and measure (recorded with it, in any spelling the registry resolves)."""
    _known_system(name)
    offset, limit = page()
    since, until = _time("since"), _time("until")
    filters = {k: request.args[k] for k in ("since", "until", "tag", "qrels_version",
                                            "measure") if k in request.args}
    store, tenant = results_store(), current_tenant()
    window = {"since": since, "until": until, "tag": filters.get("tag"),
              "qrels_version": filters.get("qrels_version")}
    if "measure" not in filters:
        items, total = store.results(tenant, name, offset=offset, limit=limit, **window)
    else:
        measure = filters["measure"]
        if not measure.strip() or len(measure) > MAX_NAME:
            raise bad_parameter("measure", "a measure name (ndcg_cut.10, nDCG@10, "
                                "ndcg_cut_10, map...)")
        keys = _recorded_keys(store, tenant, name, measure)
        items, total = store.results(tenant, name, measures=keys, offset=offset, limit=limit,
                                     **window)
    return _json({"items": items, "total": total, "offset": offset, "limit": limit,
                  "next": next_page(f"/v1/systems/{quote(name, safe='')}/results", filters,
                                offset, limit, total)})


@bp.get("/results/<result_id>")
def get_result(result_id: str):
    """The result's summary and its whole recorded document (per-topic values included)."""
    _check_result_id(result_id)
    found = results_store().get(current_tenant(), result_id)
    if found is None:
        raise _no_result(result_id)
    return _json(found)


@bp.delete("/results/<result_id>")
def delete_result(result_id: str):
    _check_result_id(result_id)
    if not results_store().delete(current_tenant(), result_id):
        raise _no_result(result_id)
    return Response(status=204)


@bp.get("/results/<result_id>/run")
def get_result_run(result_id: str):
    """The run the result kept (issue #31): its canonical TREC text, streamed a row group at a
    time (``text/plain``, the default; read back, its digest is the result's ``run_sha256``),
    or the
    stored Parquet file's bytes (``application/vnd.apache.parquet``). 404 naming why: no
    such result, or a result that kept no run."""
    from backend.kept_runs import PARQUET_MEDIA_TYPE, KeptRuns

    fmt = negotiate(["text/plain", PARQUET_MEDIA_TYPE],
                    f"text/plain (TREC run text) or {PARQUET_MEDIA_TYPE} (the stored file)")
    _check_result_id(result_id)
    tenant = current_tenant()
    summary = results_store().summary(tenant, result_id)
    if summary is None:
        raise _no_result(result_id)
    digest = summary.get("run_sha256")
    runs = KeptRuns(results_store())
    try:
        if digest is None:
            raise NotFound(digest)
        info = runs.info(tenant, digest)
        chunks = (runs.trec_chunks if fmt == "text/plain" else runs.parquet_chunks)(
            tenant, digest)
    except NotFound:
        raise Problem(404, "Not Found", f"result {result_id!r} kept no run (record with "
                      "record.keep_run true, or set the system's keep_runs, to keep runs)",
                      kind="no-kept-run") from None
    headers = {"Cranfield-Run-Sha256": digest}
    if fmt != "text/plain" and info is not None:
        headers["Content-Length"] = str(info["bytes"])
    return Response(chunks, mimetype=fmt, headers=headers)


def _settings(name: str) -> dict:
    from backend.kept_runs import KeptRuns

    return {"system": name,
            "keep_runs": KeptRuns(results_store()).keeps_runs(current_tenant(), name)}


@bp.put("/systems/<path:name>/settings")
def put_system_settings(name: str):
    """A system's settings (issue #31): ``keep_runs``, whether its results keep their runs
    when a record does not say (``record.keep_run``). The system is made if need be."""
    from backend.kept_runs import KeptRuns

    check_system_name(name)
    if request.mimetype != "application/json":
        raise Problem(415, "Unsupported Media Type", "send application/json: "
                      "{\"keep_runs\": true}", kind="unsupported-media-type")
    body = read_json_object("keep_runs", {"keep_runs"})
    if not isinstance(body["keep_runs"], bool):
        raise Problem(422, "Invalid request", "keep_runs must be true or false",
                      kind="invalid-request", errors={"keep_runs": ["Not a valid boolean."]})
    KeptRuns(results_store()).set_keeps_runs(current_tenant(), name, body["keep_runs"])
    return _json(_settings(name))


@bp.get("/systems/<path:name>/settings")
def get_system_settings(name: str):
    """A system's settings (404: no system of that name, recorded or set)."""
    from backend.kept_runs import KeptRuns

    check_system_name(name)
    if not KeptRuns(results_store()).has_system(current_tenant(), name):
        raise no_system(name)
    return _json(_settings(name))


def _baseline_body() -> str:
    if request.mimetype != "application/json":
        raise Problem(415, "Unsupported Media Type", "send application/json: "
                      "{\"result_id\": …}", kind="unsupported-media-type")
    body = read_json_object("result_id", {"result_id"})
    _check_result_id(body["result_id"])
    return body["result_id"]


@bp.put("/systems/<path:name>/baseline")
def pin_baseline(name: str):
    """Pin one of the system's results as its accepted baseline."""
    check_system_name(name)
    result_id = _baseline_body()
    try:
        summary = results_store().pin_baseline(current_tenant(), name, result_id)
    except NotFound:
        raise Problem(404, "Not Found", f"no result {result_id!r} of system {name!r}",
                      kind="not-found") from None
    return _json(summary)


@bp.get("/systems/<path:name>/baseline")
def get_baseline(name: str):
    _known_system(name)
    summary = results_store().baseline(current_tenant(), name)
    if summary is None:
        raise Problem(404, "Not Found", f"system {name!r} has no baseline pinned",
                      kind="not-found")
    return _json(summary)


def _recorded_keys(store, tenant, system: str, measure: str) -> list[str]:
    """The keys the system's results hold ``measure`` under, in whatever spelling it is asked
    (``ndcg_cut.10``, ``nDCG@10``, ``ndcg_cut_10``), the spelling asked first when recorded so:
    never an empty answer for a measure that is there under another name. 422 with
    suggestions for a name the registry does not know (or one naming several measures); 404
    naming the measures recorded when the system has no result with it."""
    from cranfield.errors import MeasureError
    from cranfield.measures.names import recorded_keys

    recorded = store.measure_keys(tenant, system)
    try:
        keys = recorded_keys(measure, recorded)
    except MeasureError as exc:
        several = not exc.suggestions and exc.reason.startswith("stands for")
        raise Problem(422, "Invalid measure" if several else "Unknown measure", str(exc),
                      kind="invalid-request" if several else "unknown-measure",
                      errors={"measure": [str(exc)]},
                      extra={"suggestions": exc.suggestions}) from None
    if not keys:
        have = ", ".join(recorded) or "none"
        message = (f"no recorded result of system {system!r} has {measure.strip()!r}; its "
                   f"results were recorded with {have}")
        close = difflib.get_close_matches(measure.strip(), recorded, n=3, cutoff=0.3)
        raise Problem(404, "Measure not recorded", message, kind="measure-not-recorded",
                      errors={"measure": [message]},
                      extra={"recorded_measures": recorded, "suggestions": close})
    return keys


def _trend_points(store, tenant, system: str, keys: list[str], **window
                  ) -> tuple[list[dict], int]:
    """:meth:`ResultStore.trend` of the measure recorded under ``keys`` (several when results
    were recorded with different spellings of it: a result's point from the first key it
    has), oldest first, the newest ``limit`` of them."""
    if len(keys) == 1:
        return store.trend(tenant, system, keys[0], qrels=True, **window)
    return _merged_points(lambda key: store.trend(tenant, system, key, qrels=True, **window),
                          keys, window.get("limit"))


def _merged_points(points_of, keys: list[str], limit: int | None) -> tuple[list[dict], int]:
    """The points ``points_of(key)`` gives for each of ``keys`` (spellings of one measure),
    merged: a result's point from the first key it has, oldest first, the newest ``limit``;
    and how many there are."""
    merged: dict[str, dict] = {}
    total = 0
    for key in keys:
        points, count = points_of(key)
        total += count - sum(p["id"] in merged for p in points)
        for p in points:
            merged.setdefault(p["id"], p)
    ordered = sorted(merged.values(), key=lambda p: p["created_at"])
    if limit is not None:
        ordered = ordered[-limit:] if limit > 0 else []
    return ordered, max(total, len(ordered))


def _scope() -> tuple[str | None, bool]:
    """The trend's ``segment`` (a label of the results' topic metadata) or ``weighted``
    (true: the weighted means) query parameter (issue #28); 400 for both, or a bad label."""
    from cranfield.inputs.segments import label_problem

    from .paging import boolean

    segment = request.args.get("segment")
    weighted = boolean("weighted", False)
    if segment is not None:
        problem = label_problem(segment) if len(segment) <= MAX_NAME else \
            f"at most {MAX_NAME} characters"
        if problem is not None:
            raise bad_parameter("segment", f"a segment label of the results' topic metadata "
                                f"(tail, lang=de...): {problem}")
        if weighted:
            raise bad_parameter("weighted", "give segment or weighted=true, not both")
    return segment, weighted


def _scoped_points(store, tenant, system: str, keys: list[str], segment: str | None,
                   weighted: bool, **window) -> tuple[list[dict], int]:
    """:func:`_trend_points`, of the segment's recorded aggregate or of the weighted mean
    when the trend is asked for one (:meth:`ResultStore.segment_trend`)."""
    if segment is None and not weighted:
        return _trend_points(store, tenant, system, keys, **window)
    return _merged_points(
        lambda key: store.segment_trend(tenant, system, key, segment, qrels=True, **window),
        keys, window.get("limit"))


@bp.get("/systems/<path:name>/trend")
def trend(name: str):
    """The measure's mean and 95% CI per recorded result, oldest first (the newest ``limit``
    of the ``since``/``until`` window), each with its latest gate verdict, and the pinned
    baseline's point; with ``Accept: text/html`` the trend page. ``segment=LABEL``: the
    measure's aggregate over that segment of each result's topic metadata, as recorded;
    ``weighted=true``: its weighted mean (issue #28); a result recorded without it is left
    out, and a segment no result has is a 404 naming the segments recorded."""
    fmt = negotiate(["application/json", "text/html"],
                    "application/json or text/html (the trend page)")
    measure = request.args.get("measure")
    if not measure or not measure.strip() or len(measure) > MAX_NAME:
        raise bad_parameter("measure", "a measure name (ndcg_cut.10, nDCG@10, ndcg_cut_10, "
                            "map...)")
    segment, weighted = _scope()
    most = current_app.config["MAX_PAGE_ITEMS"]
    limit = integer("limit", most, 1, most)
    since, until = _time("since"), _time("until")
    system = _known_system(name)
    store, tenant = results_store(), current_tenant()
    keys = _recorded_keys(store, tenant, name, measure)
    if segment is not None and segment not in store.segments_of(tenant, name):
        have = ", ".join(store.segments_of(tenant, name)) or "none"
        message = (f"no recorded result of system {name!r} has segment {segment!r}; its "
                   f"results were recorded with segments: {have}")
        raise Problem(404, "Segment not recorded", message, kind="segment-not-recorded",
                      errors={"segment": [message]})
    points, total = _scoped_points(store, tenant, name, keys, segment, weighted, since=since,
                                   until=until, limit=limit)
    baseline_point = None
    if system["baseline"] is not None:
        found = [p for p in points if p["id"] == system["baseline"]] or \
            _scoped_points(store, tenant, name, keys, segment, weighted,
                           ids=[system["baseline"]])[0]
        baseline_point = found[0] if found else None
    measure = keys[0]  # the points' measure as recorded (the spelling asked may differ)
    # a series per qrels version and where the version changes (issue #31); points and
    # baseline_point keep the shape they always had
    from backend.rescoring import public_point, trend_series

    series, boundaries = trend_series(points)
    doc = {"system": name, "measure": measure, "baseline": system["baseline"],
           "baseline_point": public_point(baseline_point),
           "points": [public_point(p) for p in points], "total": total, "limit": limit,
           "series": series, "boundaries": boundaries}
    if segment is not None:
        doc["segment"] = segment
    if weighted:
        doc["weighted"] = True
    if fmt == "text/html":
        from cranfield.reports.html_trend import render_trend

        root = request.script_root  # the API's mount point, if it is not at /

        def link(point: dict, previous: dict | None) -> str:
            if previous is None:
                return f"{root}/v1/results/{point['id']}"
            return (f"{root}/v1/results/{point['id']}/comparison?"
                    + urlencode({"with": previous["id"], "measures": measure}))

        title = (f"{name}: {measure} on segment {segment} over time" if segment is not None
                 else f"{name}: weighted {measure} over time" if weighted else None)
        return Response(render_trend(doc, link, title=title), mimetype="text/html")
    return _json(doc)


@bp.get("/results/<result_id>/comparison")
def compare_results(result_id: str):
    """The comparison of recorded result ``result_id`` with the recorded result ``with``
    (the baseline, as a trend's point is compared with the one before it) on ``measures``
    (comma-separated; default: the measures both were recorded with), as ``POST
    /v1/comparisons`` answers it (JSON, ``text/html`` or ``text/plain``)."""
    from marshmallow import ValidationError

    from .comparisons import REQUEST_SCHEMA, compare

    fmt = negotiate(["application/json", "text/html", "text/plain"])
    _check_result_id(result_id)
    other = request.args.get("with", "")
    _check_result_id(other, "with")
    if len(request.args.get("measures", "")) > MAX_MEASURES:
        raise bad_parameter("measures", f"comma-separated measure keys, at most "
                            f"{MAX_MEASURES} characters")
    store, tenant = results_store(), current_tenant()
    results = {}  # read once, whole: the comparison takes them as they are
    for rid in (other, result_id):
        results[rid] = store.get(tenant, rid)
        if results[rid] is None:
            raise _no_result(rid)
    names = _distinct_names(results[other], results[result_id])
    if "measures" in request.args:
        measures = [m.strip() for m in request.args["measures"].split(",") if m.strip()]
    else:
        measures = [m for m in results[result_id]["measures"]
                    if _held(m, results[other]["measures"])]
    body = {"runs": [{"name": names[0], "result_id": other},
                     {"name": names[1], "result_id": result_id}],
            "baseline": names[0], "measures": measures}
    try:
        req = REQUEST_SCHEMA.load(body)
    except ValidationError as exc:
        raise Problem(422, "Invalid request", "measures: " + str(exc.messages),
                      kind="invalid-request", errors={"measures": [str(exc.messages)]}) \
            from None
    return compare(req, fmt, may_queue=False, results=results)


def _held(key: str, keys: list[str]) -> bool:
    """Whether a result recorded with ``keys`` holds the measure recorded as ``key`` elsewhere
    (``nDCG@10`` is held by ``ndcg_cut_10``)."""
    from cranfield.errors import MeasureError
    from cranfield.measures.names import recorded_keys

    if key in keys:
        return True
    try:
        return bool(recorded_keys(key, keys))
    except MeasureError:
        return False


def _distinct_names(a: dict, b: dict) -> tuple[str, str]:
    """Two results' run names in a comparison: their labels, told apart by their ids' start
    when the labels are the same."""
    if a["label"] != b["label"]:
        return a["label"], b["label"]
    return f"{a['label'][:189]} ({a['id'][:8]})", f"{b['label'][:189]} ({b['id'][:8]})"
