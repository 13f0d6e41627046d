"""Do the conclusions hold? ``GET /v1/stability?measure=M&from=ID@V1&to=ID@V2`` (issue #31).

For the tenant's systems with a result holding ``measure`` recorded under both qrels versions
(a judge's or a consensus version is a version too), one result under each
(:func:`backend.stability.choose_results`: the same night when one result re-scores the
other's, else the latest under each, said per system), their recorded per-topic values on
the topics all of them share: the system ranking's Kendall τ_b, τ_AP and RBO_ext with
percentile bootstrap CIs over topics, and every pair of systems whose significant difference
appeared, vanished or flipped under the comparisons' paired test and correction
(:func:`cranfield.compare.stability.stability`). JSON, ``text/plain`` or ``text/html`` (the
stability page).

Bounded before work: the results read, the values and the statistics' work
(:func:`stability_budget`) against MAX_STABILITY_WORK; more is 422 naming ``work``. Only the
tenant's results count: a version no result of the tenant was recorded under is a 404
naming ``from`` or ``to``, whoever else's it is."""

from __future__ import annotations

import re

import orjson
from flask import Blueprint, Response, current_app, request

# imported with the blueprint, not at the first request: a server runs the code it started
# with, whole (a lazy import read whatever the files held at the first GET: a server
# started before a change to backend/stability.py and asked after it mixed the two, a
# TypeError and a 500 on topic_bound's new return value)
from backend import stability as gather
from cranfield.compare.comparison_settings import CORRECTIONS, TESTS
from cranfield.compare.stability import stability, stability_work
from cranfield.compare.stability_text import format_text
from cranfield.reports.html_stability import render_stability

from .auth import current_tenant
from .negotiation import negotiate
from .paging import bad_parameter, integer
from .problems import Problem

bp = Blueprint("stability", __name__, url_prefix="/v1")
# a stored qrels (or judge's, or consensus) version: id@version, the version required
VERSION_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}@[0-9a-f]{16}$")
FRACTION = re.compile(r"^(0|1)?\.[0-9]{1,17}$|^0$|^1$")
MAX_NAME = 200
DEFAULT_RESAMPLES = 1000
MAX_RESAMPLES = 100_000
MAX_PERMUTATIONS = 1_000_000
# units of work (cranfield.compare.comparison_work's, ~0.05 ns) of reading one result's
# summary row (choosing the pairs) and one per-topic value (decoding, pairing topics)
WORK_PER_RESULT_ROW = 1_000_000
WORK_PER_VALUE = 20_000
# choices made again when a chosen result is deleted before its values are read
CHOICE_ATTEMPTS = 3


def _json(doc, status: int = 200) -> Response:
    return Response(orjson.dumps(doc), status=status, mimetype="application/json")


def _choice(name: str, options: tuple[str, ...], default: str) -> str:
    value = request.args.get(name, default)
    if value not in options:
        raise bad_parameter(name, f"one of {', '.join(options)}: got {value[:40]!r}")
    return value


def _fraction(name: str, default: float, *, complement: bool = False) -> float:
    """A number strictly between 0 and 1, in plain decimal notation (0.05, .9); with
    ``complement``, 1 − x too: the pairs are tested at level 1 − alpha, and 1 − 1e-17 is 1.0
    in a double (the tests' ValueError, a 500, before)."""
    text = request.args.get(name)
    if text is None:
        return default
    value = float(text) if FRACTION.match(text) else None
    if value is None or not 0.0 < value < 1.0 or (complement and not 1.0 - value < 1.0):
        also = ", and 1 minus it too (1e-17 is not)" if complement else ""
        raise bad_parameter(name, f"a number strictly between 0 and 1 (0.05, 0.9){also}: got "
                            f"{text[:40]!r}")
    return value


def _version(name: str) -> str:
    text = request.args.get(name)
    if text is None or not VERSION_REF.match(text):
        raise bad_parameter(name, "a stored qrels version, ID@VERSION (the id, @, and the "
                            "16 hex digits of the version), as results record it")
    return text


def _measure() -> str:
    measure = request.args.get("measure")
    if not measure or not measure.strip() or len(measure) > MAX_NAME:
        raise bad_parameter("measure", "a measure name (ndcg_cut.10, nDCG@10, ndcg_cut_10, "
                            "map...)")
    return measure.strip()


def _over_budget(what: str, total: int, budget: int, extra: dict) -> Problem:
    return Problem(422, "Stability over the work budget",
                   f"this stability document is {total:,} units of work, over the budget of "
                   f"{budget:,}: {what}; ask for fewer resamples or permutations, or a "
                   "cheaper test",
                   kind="work-over-budget",
                   errors={"work": [f"{total:,} units of work exceed MAX_STABILITY_WORK "
                                    f"({budget:,})"]},
                   extra={"work": {**extra, "total": total, "budget": budget,
                                   "formula": what}})


def _keys(store, tenant, versions: tuple[str, str], measure: str) -> list[str]:
    """The measure's keys among those the results under ``versions`` were recorded with:
    422 for a name the registry does not know, 404 when none holds it."""
    from cranfield.errors import MeasureError
    from cranfield.measures.names import recorded_keys

    recorded = gather.measures_under(store, tenant, versions)
    try:
        keys = recorded_keys(measure, recorded)
    except MeasureError as exc:
        raise Problem(422, "Unknown measure", str(exc), kind="unknown-measure",
                      errors={"measure": [str(exc)]},
                      extra={"suggestions": exc.suggestions}) from None
    if not keys:
        message = (f"no result of yours under {versions[0]} or {versions[1]} has "
                   f"{measure!r}; they were recorded with {', '.join(recorded) or 'none'}")
        raise Problem(404, "Measure not recorded", message, kind="measure-not-recorded",
                      errors={"measure": [message]}, extra={"recorded_measures": recorded})
    return keys


def _gather(store, tenant, versions: tuple[str, str], keys: list[str], rows: int,
            budget: int, work_of) -> tuple[gather.Matrices, dict]:
    """The chosen results' per-topic matrices and the systems left out, within the budget:
    the choice (404 when no system has results under both versions), the work it makes
    (``work_of(systems, topics)``: the statistics'; 422 over the budget), then the values.
    A chosen result deleted before its values were read (a concurrent DELETE) is chosen
    again, up to CHOICE_ATTEMPTS times; results deleted faster than that are a 503."""
    for _ in range(CHOICE_ATTEMPTS):
        chosen, left_systems = gather.choose_results(store, tenant, *versions, keys)
        if not chosen:
            message = (f"no system of yours has a result with {keys[0]} under both "
                       f"{versions[0]} and {versions[1]} (under {versions[0]} only: "
                       f"{', '.join(left_systems['from_only'][:20]) or 'none'}; under "
                       f"{versions[1]} only: {', '.join(left_systems['to_only'][:20]) or 'none'})")
            raise Problem(404, "No systems under both versions", message,
                          kind="no-common-systems", errors={"to": [message]})
        n_topics, values = gather.topic_bound(store, chosen)  # (values: every one decoded)
        work = work_of(len(chosen), n_topics)
        total = work.total + WORK_PER_VALUE * values + WORK_PER_RESULT_ROW * rows
        if total > budget:
            raise _over_budget(f"{work.describe()}; + {WORK_PER_VALUE:,} × {values:,} "
                               f"per-topic values + {WORK_PER_RESULT_ROW:,} × {rows:,} "
                               "results read", total, budget,
                               {"systems": work.systems, "topics": work.topics,
                                "resamples": work.resamples, "results": rows})
        try:
            return gather.value_matrices(store, tenant, chosen), left_systems
        except gather.ResultGone:
            continue
    raise Problem(503, "Service Unavailable", "the results this document reads were deleted "
                  f"while it was made, {CHOICE_ATTEMPTS} times; retry shortly",
                  kind="unavailable", headers={"Retry-After": "1"})


@bp.get("/stability")
def stability_document():
    """The stability document of ``measure`` between qrels versions ``from`` and ``to``."""
    fmt = negotiate(["application/json", "text/plain", "text/html"],
                    "application/json, text/plain or text/html (the stability page)")
    measure = _measure()
    versions = (_version("from"), _version("to"))
    if versions[0] == versions[1]:
        raise Problem(422, "Invalid request", "to: the same version as from; give two "
                      "versions to compare", kind="invalid-request",
                      errors={"to": ["must differ from from"]})
    test = _choice("test", TESTS, "t")
    correction = _choice("correction", CORRECTIONS, "holm")
    alpha = _fraction("alpha", 0.05, complement=True)
    level = _fraction("level", 0.95)
    persistence = _fraction("persistence", 0.9)
    resamples = integer("resamples", DEFAULT_RESAMPLES, 1, MAX_RESAMPLES)
    permutations = integer("permutations", 10_000, 1, MAX_PERMUTATIONS)
    seed = integer("seed", 0, 0, 2**32 - 1)

    store, tenant = current_app.extensions["results"], current_tenant()
    for name, version in zip(("from", "to"), versions, strict=True):
        if not gather.recorded_under(store, tenant, version):
            message = f"no result of yours was recorded under qrels {version}"
            raise Problem(404, "Not Found", message, kind="not-found",
                          errors={name: [message]})
    keys = _keys(store, tenant, versions, measure)
    budget = current_app.config["MAX_STABILITY_WORK"]
    rows = gather.count_results(store, tenant, versions)
    if rows * WORK_PER_RESULT_ROW > budget:
        raise _over_budget(f"{rows:,} results recorded under the two versions × "
                           f"{WORK_PER_RESULT_ROW:,} to choose the pairs",
                           rows * WORK_PER_RESULT_ROW, budget, {"results": rows})
    m, left_systems = _gather(
        store, tenant, versions, keys, rows, budget,
        lambda s, t: stability_work(s, t, resamples, test, permutations, resamples))
    chosen = m.chosen
    doc = stability(m.a, m.b, [c.system for c in chosen], m.topics, measure=keys[0], test=test,
                    correction=correction, alpha=alpha, n_resamples=resamples,
                    n_permutations=permutations, seed=seed, level=level,
                    persistence=persistence)
    for entry, c in zip(doc["systems"], chosen, strict=True):
        entry["paired_by"] = c.paired_by
        entry["from"].update(result_id=c.from_id, created_at=c.from_created)
        entry["to"].update(result_id=c.to_id, created_at=c.to_created)
    for bad in m.unreadable:
        doc["warnings"].append({"code": "values-unreadable", "message": (
            f"system {bad['system']} left out: the per-topic values of {bad['measure']} in "
            f"its result {bad['result_id']} cannot be read ({bad['reason']})")})
    doc = {"from": versions[0], "to": versions[1], **doc,
           "systems_left_out": left_systems,
           "topics_left_out": {"count": len(m.left_topics), "topics": m.left_topics[:100]}}
    if fmt == "text/plain":
        return Response(format_text(doc), mimetype="text/plain")
    if fmt == "text/html":
        return Response(render_stability(doc), mimetype="text/html")
    return _json(doc)
