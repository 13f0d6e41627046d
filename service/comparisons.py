"""``POST /v1/comparisons``: is run B better than A? (Pools, what to judge: :mod:`service.pools`.)

A comparison takes two or more runs — inline (mappings or TREC text), uploaded as multipart
files, the ids of finished evaluation jobs, or the ids of recorded results (issue #18; a
system's pinned baseline with ``"baseline": {"system": NAME}``, so one run is enough) —
against one qrels, and answers with each
run's mean and CI per measure, paired tests with family-wide corrected p-values, effect
sizes, wins/ties/losses, the topics with the largest losses and an optional regression gate
(:mod:`cranfield.compare.comparison`). Large ones (a body over the async threshold, or ``Prefer:
respond-async``) run as jobs. ``Accept: text/html`` gives the report page.

Limits: every run and the qrels of a comparison are held to MAX_TOPICS and
MAX_DOCS_PER_TOPIC as an evaluation's are (413 naming ``runs[i].run``,
``runs[i].run.<topic>``, ``qrels`` or ``qrels_id``; a queued comparison's job fails with
the same problem). A synchronous comparison's work
(:func:`cranfield.compare.comparison_work.comparison_work`) is held to MAX_COMPARISON_WORK, checked
once its measures and common topics are known and before the comparison allocates anything: over it,
422 with the figures (``work``). A comparison asked for with ``Prefer: respond-async`` (or
too large a body) is queued whatever its work: the budget guards the web worker, and a job
is bounded by JOB_TIMEOUT.

Budgets before work (issue #27): the runs a comparison evaluates are held to an
evaluation's budgets. The measures (those asked for and the gates') are held to
MAX_MEASURE_INSTANCES before any input is read, sync and queued, their parameters before
any name is parsed; each inline run's instances × topics to MAX_EVALUATION_VALUES here and
MAX_QUEUED_EVALUATION_VALUES in a job (which fails with the same problem): 422
``work-over-budget`` naming the budget, its factors and the run.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import asdict
from typing import Any

import orjson
from flask import Blueprint, Response, current_app
from marshmallow import (
    RAISE,
    Schema,
    ValidationError,
    fields,
    post_load,
    validate,
    validates_schema,
)

from backend.contract import ComparisonJob
from cranfield.compare.comparison import run_names
from cranfield.compare.comparison_settings import TESTS
from cranfield.compare.comparison_work import WorkBudgetError, work_budget
from cranfield.errors import InputError
from cranfield.inputs.grammar import GAINS
from cranfield.inputs.json_body import loads as json_loads
from cranfield.measures.budget import BudgetError, evaluation_budget
from cranfield.measures.names import needs_subtopics
from cranfield.reports.html_report import render_comparison

from .auth import current_tenant
from .enqueue import (
    accepted,
    check_measure_instances,
    check_measure_parameters,
    over_budget,
    submission,
    wants_async,
)
from .evaluation_request import file_parts, form_parts, load_body
from .evaluations import CONTROL
from .inputs import digest, read_input, serialised, settle_stored_gains, stored_qrels
from .limits import check_qrels, check_run
from .multipart import OPTIONS_FIELD, form_number, measure_list
from .negotiation import negotiate
from .paging import boolean_word
from .problems import Problem
from .schemas import (
    NameList,
    OptionsSchema,
    RunOrQrels,
    TopicMetadataField,
    stored_ref,
    strict_bool,
)
from .topic_metadata import resolve as resolve_topic_metadata

bp = Blueprint("comparisons", __name__)

CORRECTIONS = ("holm", "bonferroni", "bh", "none")


# --------------------------------------------------------------------------------------------
# Schemas
# --------------------------------------------------------------------------------------------

class CompareOptionsSchema(OptionsSchema):
    """The evaluation options of every compared run (micro-averaging has no per-topic
    values, so it is not one of them)."""

    class Meta:
        unknown = RAISE
        exclude = ("aggregation",)

    # segments and weights (issue #28): each segment compared too, its own family
    topic_metadata = TopicMetadataField(allow_none=True)
    # real-valued gains (issue #31), as an evaluation's: absent, no key (integer grades);
    # OptionsSchema's _settle_profile reads it (cranfield's profile when none is named; a
    # trec_eval profile named beside it drops it: a non-integer grade refused as without)
    gains = fields.String(validate=validate.OneOf(GAINS))

    @post_load
    def _without_null_topic_metadata(self, data, **kwargs):
        if data.get("topic_metadata", ...) is None:  # absent or null: no key, as before
            del data["topic_metadata"]
        return data


_NAME = validate.Regexp(r"^[^\x00-\x1f]{1,200}$", error="must be 1-200 printable characters")


class RunEntrySchema(Schema):
    class Meta:
        unknown = RAISE

    name = fields.String(load_default=None, validate=_NAME)
    run = RunOrQrels(load_default=None, allow_none=False)
    evaluation_id = fields.String(load_default=None, allow_none=False, validate=validate.Regexp(
        r"^[0-9a-f]{32}$", error="must be the id of a finished evaluation job"))
    result_id = fields.String(load_default=None, allow_none=False, validate=validate.Regexp(
        r"^[0-9a-f]{32}$", error="must be the id of a recorded result"))

    @validates_schema
    def _one_source(self, data, **kwargs):
        given = [k for k in ("run", "evaluation_id", "result_id") if data.get(k) is not None]
        if len(given) != 1:
            raise ValidationError("give exactly one of run, evaluation_id and result_id",
                                  "run")


class BaselineField(fields.Field):
    """The baseline: the name of one of the runs, or ``{"system": NAME}``, the system's
    pinned baseline result (it joins the runs)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, str):
            return value
        if isinstance(value, dict):
            unknown = sorted(set(value) - {"system"})
            if unknown:
                raise ValidationError({k: ["Unknown field."] for k in unknown})
            system = value.get("system")
            if not isinstance(system, str) or not 1 <= len(system) <= 200 \
                    or CONTROL.search(system):  # a system name as record takes it
                raise ValidationError({"system": ["must be a system name (1-200 printable "
                                                  "characters)"]})
            return {"system": system}
        raise ValidationError('must be the name of a run or {"system": NAME}')


class GateSchema(Schema):
    class Meta:
        unknown = RAISE

    measure = fields.String(required=True, validate=validate.Length(min=1))
    max_drop = fields.Float(required=True, allow_nan=False, validate=validate.Range(min=0))
    relative = strict_bool(load_default=False)
    alpha = fields.Float(load_default=0.05, allow_nan=False,
                         validate=validate.Range(min=0, max=1, min_inclusive=False,
                                                 max_inclusive=False))
    test = fields.String(load_default="randomization", validate=validate.OneOf(TESTS))
    baseline = fields.String(load_default=None)
    candidate = fields.String(load_default=None)
    # a segment of the topic metadata (issue #28): checked against it by the engine
    # (cranfield.compare.gate.segment_view: 422 naming gate.segment for one it lacks)
    segment = fields.String(load_default=None, validate=validate.Length(min=1))


class GateField(fields.Field):
    """A gate: the CLI's ``MEASURE:MAX_DROP[%][@ALPHA]`` text, an object, or a list of them."""

    def _deserialize(self, value, attr, data, **kwargs):
        from cranfield.compare.gate import parse_gate

        items = value if isinstance(value, list) else [value]
        if not items:
            raise ValidationError("give at least one gate")
        out, errors = [], {}
        for i, item in enumerate(items):
            where = i if isinstance(value, list) else None
            try:
                if isinstance(item, str):  # parsed once, here: jobs get the fields
                    out.append(asdict(parse_gate(item)))
                elif isinstance(item, dict):
                    out.append(GateSchema().load(item))
                else:
                    raise ValidationError("must be MEASURE:MAX_DROP[%][@ALPHA] or an object")
            except ValueError as exc:  # parse_gate's message; ValidationError is one too
                msg = exc.messages if isinstance(exc, ValidationError) else [str(exc)]
                if where is None:
                    raise ValidationError(msg) from None
                errors[where] = msg
        if errors:
            raise ValidationError(errors)
        return out if isinstance(value, list) else out[0]


class ComparisonRequestSchema(Schema):
    class Meta:
        unknown = RAISE

    runs = fields.List(fields.Nested(RunEntrySchema), required=True,
                       validate=validate.Length(min=1, max=50))
    qrels = RunOrQrels(load_default=None, allow_none=False)
    qrels_id = stored_ref("qrels")
    # stored topic metadata (issue #28), optionally @version: not with options.topic_metadata
    topic_metadata_id = stored_ref("topic metadata")
    measures = NameList(max_names=50, load_default=None)
    options = fields.Nested(CompareOptionsSchema, load_default=lambda: CompareOptionsSchema()
                            .load({}))
    baseline = BaselineField(load_default=None, allow_none=True)
    tests = fields.List(fields.String(validate=validate.OneOf(TESTS)),
                        load_default=lambda: ["t", "randomization", "bootstrap"],
                        validate=validate.Length(min=1))
    correction = fields.String(load_default="holm", validate=validate.OneOf(CORRECTIONS))
    alpha = fields.Float(load_default=0.05, allow_nan=False, validate=validate.Range(
        min=0, max=1, min_inclusive=False, max_inclusive=False))
    permutations = fields.Integer(load_default=10_000, strict=True,
                                  validate=validate.Range(min=100, max=1_000_000))
    bootstrap_samples = fields.Integer(load_default=10_000, strict=True,
                                       validate=validate.Range(min=100, max=1_000_000))
    seed = fields.Integer(load_default=0, strict=True, validate=validate.Range(min=0))
    largest_losses = fields.Integer(load_default=5, strict=True,
                                    validate=validate.Range(min=0, max=100))
    per_topic = strict_bool(load_default=True)
    curves = strict_bool(load_default=True)
    gate = GateField(load_default=None, allow_none=False)

    @validates_schema
    def _names_and_qrels(self, data, **kwargs):
        runs = data.get("runs") or []
        system = isinstance(data.get("baseline"), dict)
        if runs and len(runs) < 2 and not system:
            raise ValidationError('give at least two runs (one is enough with "baseline": '
                                  '{"system": NAME})', "runs")
        # a recorded result's default name (system@label) is known once it is read
        names = [r.get("name") or (None if r.get("result_id") else f"run{i + 1}")
                 for i, r in enumerate(runs)]
        _check_names(names, None if system else data.get("baseline"), ValidationError)
        inline = any(r.get("run") is not None for r in data.get("runs") or [])
        if data.get("qrels") is not None and data.get("qrels_id") is not None:
            raise ValidationError("give at most one of qrels and qrels_id", "qrels")
        if inline and data.get("qrels") is None and data.get("qrels_id") is None:
            raise ValidationError("inline runs need qrels or qrels_id", "qrels")


def _check_names(names: list[str | None], baseline: str | None, error) -> None:
    """Raise ``error`` (ValidationError, or :func:`_invalid`) if a name is given to two runs or
    ``baseline`` is none of them; ``None``: a name not known yet."""
    for i, name in enumerate(names):
        if name is not None and name in names[:i]:
            raise error({"runs": {i: {"name": [f"{name!r} names two runs"]}}})
    if baseline is not None and None not in names and baseline not in names:
        raise error(f"{baseline!r} is not one of the runs ({', '.join(names)})", "baseline")


def _invalid(message, field: str | None = None) -> Problem:
    """422 for a request whose run names clash once recorded results have their names."""
    if field is None:  # {"runs": {i: {"name": [...]}}}
        i, errors = next(iter(message["runs"].items()))
        field, message = f"runs[{i}].name", errors["name"][0]
    return Problem(422, "Invalid request", f"{field}: {message}", kind="invalid-request",
                   errors={field: [message]})


REQUEST_SCHEMA = ComparisonRequestSchema()


# --------------------------------------------------------------------------------------------
# Request parsing
# --------------------------------------------------------------------------------------------

_FORM_SCALARS = {"alpha": float, "permutations": int, "bootstrap_samples": int, "seed": int,
                 "largest_losses": int, "depth": int, "relevance_level": int,
                 "collection_size": int}
_FORM_BOOLEANS = ("per_topic", "curves", "judged_only", "complete_topics")
_FORM_LISTS = ("measures", "tests", "gate")
_OPTION_KEYS = ("profile", "relevance_level", "judged_only", "depth", "complete_topics",
                "collection_size", "topic_metadata", "gains")
# fields naming runs that are not uploaded (repeated): runs[].result_id, runs[].evaluation_id
_FORM_RUN_IDS = ("result_id", "evaluation_id")


def _form_request(option_keys=_OPTION_KEYS, max_runs: int | None = None) -> dict:
    """multipart/form-data: repeated ``runs`` files (named by their file names), a ``qrels``
    file, and the other fields as text (lists repeated or comma-separated). More than
    ``max_runs`` files are refused before anything is done with them (naming them compares
    every file name with the others)."""
    form, files = form_parts(repeatable=frozenset({"runs", *_FORM_RUN_IDS, *_FORM_LISTS}))
    body: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    filenames = files.filenames.getlist("runs")
    if max_runs is not None and len(filenames) > max_runs:
        reason = f"Length must be between 1 and {max_runs}."
        raise Problem(422, "Invalid request", f"runs: {len(filenames)} files; {reason}",
                      kind="invalid-request", errors={"runs": [reason]})
    names = run_names(filenames)  # the CLI's rule: ql.txt -> ql
    runs = [{"name": n, "run": data} for n, data in zip(
        names, file_parts(files, "runs", lambda i: f"runs[{i}]"), strict=True)]
    runs += [{"run": text} for text in form.getlist("runs")]
    runs += [{key: value} for key in _FORM_RUN_IDS for value in form.getlist(key)]
    if runs:
        body["runs"] = runs
    if "qrels" in files:
        body["qrels"] = file_parts(files, "qrels")[0]
    for key in form:
        if key == "runs" or key in _FORM_RUN_IDS:
            continue
        values = form.getlist(key)
        if key == "gate":  # each field one gate (a MEASURE:MAX_DROP text or JSON object)
            texts = [v.strip() for v in values if v.strip()]
            items, refused = [], False
            for i, text in enumerate(texts):
                try:
                    items.append(_json_object(text))
                except InputError as exc:  # named as the JSON body's gate would be
                    where = "gate" if len(texts) == 1 else f"gate[{i}]"
                    errors[f"{where}.{exc.location}"] = [exc.reason]
                    refused = True
            if refused:
                continue
            body[key] = "" if not items else items if len(items) > 1 else items[0]
            continue
        if key in _FORM_LISTS:
            items = (measure_list(values) if key == "measures" else
                     [v.strip() for value in values for v in value.split(",") if v.strip()])
            # an empty field: as if the list were empty (the schema decides)
            body[key] = items
            continue
        value = values[-1]
        if key == "options":  # refused alone or beside option fields (review R2 F9)
            errors[key] = [OPTIONS_FIELD]
            continue
        try:
            if key in _FORM_BOOLEANS:
                parsed: Any = boolean_word(value)  # the one rule of every form boolean
                if parsed is None:
                    raise ValueError("must be true or false")
            elif key in _FORM_SCALARS:
                parsed = form_number(value, _FORM_SCALARS[key])  # ASCII digits, as JSON
            elif key == "baseline":
                parsed = _json_object(value)
            else:
                parsed = value
        except InputError as exc:  # a key given twice: named as in a JSON body
            errors[f"{key}.{exc.location}"] = [exc.reason]
            continue
        except ValueError:
            errors[key] = [f"must be {'true or false' if key in _FORM_BOOLEANS else 'a number'}"]
            continue
        if key in option_keys:
            body.setdefault("options", {})[key] = parsed
        else:
            body[key] = parsed
    for key in files:
        if key == "topic_metadata" and key in option_keys:  # its text, as a file
            body.setdefault("options", {})[key] = files.getlist(key)[0]
        elif key not in ("runs", "qrels"):
            errors[key] = ["unknown file field (expected runs and qrels"
                           + (", topic_metadata)" if "topic_metadata" in option_keys else ")")]
    if errors:
        raise Problem(422, "Invalid request", "some form fields are invalid",
                      kind="invalid-request", errors=errors)
    return body


def _json_object(value: str):
    """A form value that is a JSON object (``{"system": NAME}`` as ``baseline``, a gate as an
    object) as that object, as the JSON body carries it; any other value as it is (a run's
    name, a MEASURE:MAX_DROP gate: neither starts with a brace and is a JSON object). An
    object holding a key twice is :class:`InputError` naming its path (``system``), as the
    JSON body's reader refuses it: one input, one answer, never last-wins."""
    if value.startswith("{"):
        try:
            parsed = json_loads(value)
        except orjson.JSONDecodeError:
            return value
        if isinstance(parsed, dict):
            return parsed
    return value


def load_runs_body(schema: Schema, option_keys=_OPTION_KEYS, max_runs: int | None = None
                   ) -> dict:
    """A request that sends runs (a comparison, a pool, a batch of evaluations), validated by
    ``schema``: JSON, or multipart/form-data with repeated ``runs`` files named by their file
    names, a ``qrels`` file and the other fields as text; ``option_keys``: the form fields
    that go into ``options``; ``max_runs``: the most run files (default: the schema's)."""
    most = max_runs or next((v.max for v in schema.fields["runs"].validators
                             if isinstance(v, validate.Length)), None)
    return load_body(schema, lambda: _form_request(option_keys, most))


def _bad_input(problem: dict) -> Problem:
    return Problem(problem.get("status", 422), problem.get("title", "Invalid input"),
                   problem.get("detail", ""), kind="invalid-input",
                   errors=problem.get("errors"))


def _over_budget(exc: WorkBudgetError) -> Problem:
    """422 naming the product and its figures (``work``), with the way out."""
    work = exc.work
    return Problem(
        422, "Comparison over the work budget",
        f"{exc}; or ask for it to be queued with Prefer: respond-async",
        kind="work-over-budget",
        errors={"work": [f"{work.total:,} units of work exceed MAX_COMPARISON_WORK "
                         f"({exc.budget:,})"]},
        extra={"work": {"pairs": work.pairs, "measures": work.measures,
                        "columns": work.columns, "topics": work.topics,
                        "permutations": work.permutations,
                        "bootstrap_samples": work.bootstrap_samples,
                        "wilcoxon": work.wilcoxon, "resamples": work.resamples,
                        "total": work.total, "budget": exc.budget,
                        "formula": work.describe()}})


# --------------------------------------------------------------------------------------------
# Comparisons
# --------------------------------------------------------------------------------------------

def _spec(req: dict) -> ComparisonJob:
    """The comparison's job (settings and gate; inputs and who asked are added when it is
    queued): the synchronous path runs the same task code on it."""
    return ComparisonJob(measures=req["measures"], options=req["options"],
                         baseline=req["baseline"], tests=req["tests"],
                         correction=req["correction"], alpha=req["alpha"],
                         n_permutations=req["permutations"], n_samples=req["bootstrap_samples"],
                         seed=req["seed"], largest_losses=req["largest_losses"],
                         per_topic=req["per_topic"], curves=req["curves"], gate=req["gate"],
                         topic_metadata_version=req.get("topic_metadata_version"))


def _recorded(req: dict, results: dict[str, dict], *, whole: bool = True
              ) -> list[dict | None]:
    """The recorded results a request names, one per run entry (None for the others), read
    from the tenant's results: unknown ids are 422 naming ``runs[i].result_id``. An entry
    without a name gets its result's ``system@label``. With ``"baseline": {"system": S}``,
    S's pinned baseline joins the runs, last, as a result entry, and ``baseline`` becomes
    its name (422 naming ``baseline.system`` when S has none). ``results``: results already
    read by id, not read again. ``whole``: read each result's document and per-topic values
    (else only its summary: enough for a comparison that is queued)."""
    runs = req["runs"]
    if not any(r.get("result_id") for r in runs) and not isinstance(req.get("baseline"), dict):
        return [None] * len(runs)
    store = current_app.extensions["results"]
    tenant = current_tenant()
    read = store.get if whole else store.summary
    found: list[dict | None] = []
    for i, entry in enumerate(runs):
        if not entry.get("result_id"):
            found.append(None)
            continue
        result = results.get(entry["result_id"]) or read(tenant, entry["result_id"])
        if result is None:
            raise Problem(422, "Unknown result", f"no recorded result {entry['result_id']!r}",
                          kind="unknown-result", errors={f"runs[{i}].result_id": [
                              "no recorded result with this id (unknown, or deleted)"]})
        entry["name"] = entry.get("name") or f"{result['system']}@{result['label']}"
        found.append(result)
    if isinstance(req.get("baseline"), dict):
        system = req["baseline"]["system"]
        pinned = store.baseline(tenant, system)
        if pinned is not None:  # like with like (issue #31): its re-score under these qrels
            pinned = _baseline_like_with_like(req, found, store, tenant, system, pinned)
        result = None if pinned is None else (read(tenant, pinned["id"]) if whole else pinned)
        if result is None:
            message = f"no baseline pinned for system {system}: PUT /v1/systems/{system}/baseline"
            raise Problem(422, "No baseline pinned", message, kind="no-baseline",
                          errors={"baseline.system": [message]})
        name = f"{result['system']}@{result['label']}"
        if name in [r.get("name") for r in runs]:
            message = (f"the pinned baseline's name {name!r} is also a run's: name that run "
                       "otherwise")
            raise Problem(422, "Invalid request", message, kind="invalid-request",
                          errors={"baseline.system": [message]})
        runs.append({"name": name, "run": None, "evaluation_id": None,
                     "result_id": result["id"], "field": "baseline.system"})
        req["baseline"] = name
        found.append(result)
    _check_names(run_entry_names(req), req.get("baseline"), _invalid)
    return found


def _baseline_like_with_like(req: dict, found: list[dict | None], store, tenant, system: str,
                             pinned: dict) -> dict:
    """The pinned baseline, or its re-score under the comparison's qrels when it was
    evaluated under others (``backend.rescoring.baseline_under``): the qrels of ``qrels_id``,
    else those of the recorded results compared (when they share one digest); 409 naming
    ``baseline.system`` and how to re-score it when no re-score is recorded."""
    from backend.rescoring import BaselineNotRescored, baseline_under
    from backend.store import StoreError, split_ref

    sha256 = name = None
    if req.get("qrels_id"):
        try:
            meta = current_app.extensions["cranfield"].store.scoped(tenant).meta(
                *split_ref(req["qrels_id"]))
            sha256, name = meta["sha256"], f"{meta['id']}@{meta['version']}"
        except StoreError:  # unknown qrels: the comparison's own 422 says so
            return pinned
    elif req.get("qrels") is None:
        digests = {(r["qrels_sha256"], r.get("qrels_version")) for r in found if r}
        if len({d for d, _ in digests}) == 1:
            sha256, name = next(iter(digests))
    try:
        return baseline_under(store, tenant, system, pinned, sha256, name)
    except BaselineNotRescored as exc:
        raise Problem(409, "Baseline under other qrels", str(exc),
                      kind="baseline-not-rescored",
                      errors={"baseline.system": [str(exc)]}) from None


def run_entry_names(req: dict) -> list[str]:
    """The names of a request's runs: each entry's ``name``, else ``run1``, ``run2``..."""
    return [r["name"] or f"run{i + 1}" for i, r in enumerate(req["runs"])]


@bp.post("/v1/comparisons")
def create_comparison():
    """Compare two or more runs over topics: means with CIs, paired tests with corrected
    p-values, effect sizes, wins/ties/losses, largest losses, and an optional gate."""
    fmt = negotiate(["application/json", "text/html", "text/plain"])
    return compare(load_runs_body(REQUEST_SCHEMA), fmt)


def compare(req: dict, fmt: str, *, may_queue: bool = True,
            results: dict[str, dict] | None = None) -> Response:
    """A validated comparison request (``REQUEST_SCHEMA``'s) answered in ``fmt``: run here,
    or queued when the request asks to be (and ``may_queue``); a gate's verdict on a
    recorded result is kept."""
    from backend.tasks import BadInput, compare_inputs, compared_measures, record_gate_verdicts

    queued = may_queue and wants_async()
    resolve_topic_metadata(req, req["options"])  # topic_metadata_id: the stored mapping
    settle_stored_gains(req)  # stored real gains: cranfield's profile, unless one is named
    # a queued comparison's worker reads the results itself: here only their names count
    recorded = _recorded(req, results or {}, whole=not queued)
    spec = _spec(req)
    names = run_entry_names(req)
    backend = current_app.extensions["cranfield"]
    _check_measure_names(req)
    try:
        measures = compared_measures(spec)
    except BadInput as exc:
        raise _bad_input(exc.problem) from None
    # the instances every inline run is evaluated with, before any input is read (a queued
    # comparison's too): an evaluation's budget, MAX_MEASURE_INSTANCES
    check_measure_instances({"measures": measures, "options": req["options"]})
    if queued:
        return _enqueue_comparison(req, spec, names)
    cfg = current_app.config
    qrels = qrels_digest = version = None
    try:
        if req.get("qrels_id"):
            qrels, meta = stored_qrels(req["qrels_id"])
            qrels_digest, version = meta["sha256"], f"{meta['id']}@{meta['version']}"
            check_qrels(qrels, "qrels_id", cfg)
        elif req.get("qrels") is not None:
            subtopics = needs_subtopics(measures, req["options"]["profile"])
            # declared real gains read as such (the schema kept options.gains only under a
            # profile that reads them), as POST /v1/evaluations reads its qrels
            qrels, source = read_input(req["qrels"], "qrels", subtopics,
                                       gains=req["options"].get("gains") or "integer")
            qrels_digest = digest(source)
            check_qrels(qrels, "qrels", cfg)
        entries = []
        for i, (name, entry, result) in enumerate(zip(names, req["runs"], recorded,
                                                      strict=True)):
            if result is not None:
                entries.append({"name": name, "evaluation": result["document"],
                                "result_id": result["id"],
                                "field": entry.get("field") or f"runs[{i}].result_id"})
                continue
            if entry.get("evaluation_id"):
                doc = backend.finished_evaluation(entry["evaluation_id"], current_tenant())
                if doc is None:
                    raise Problem(422, "Unknown evaluation", f"no finished evaluation "
                                  f"{entry['evaluation_id']!r}", kind="unknown-evaluation",
                                  errors={f"runs[{i}].evaluation_id": [
                                      "no finished evaluation job with this id (unknown, "
                                      "unfinished, failed or expired)"]})
                entries.append({"name": name, "evaluation": doc,
                                "evaluation_id": entry["evaluation_id"]})
                continue
            run, source = read_input(entry["run"], "run", label=f"runs[{i}]")
            check_run(run, f"runs[{i}].run", cfg)
            entries.append({"name": name, "run": run, "sha256": digest(source)})
        # compare_inputs turns engine errors into BadInput; the budgets keep their own. Each
        # inline run is evaluated within an evaluation's budget (MAX_EVALUATION_VALUES:
        # instances × topics, before its per-topic arrays), as POST /v1/evaluations is
        with work_budget(cfg["MAX_COMPARISON_WORK"]) as budget, evaluation_budget(
                cfg["MAX_MEASURE_INSTANCES"], cfg["MAX_EVALUATION_VALUES"],
                max_segments=cfg["MAX_SEGMENTS"]):
            try:
                doc = compare_inputs(entries, qrels, qrels_digest, version, spec, measures)
            except (BadInput, WorkBudgetError):
                if budget.exceeded is not None:
                    raise _over_budget(budget.exceeded) from None
                raise
    except BadInput as exc:
        raise _bad_input(exc.problem) from None
    except BudgetError as exc:
        raise over_budget(exc, cfg["MAX_QUEUED_EVALUATION_VALUES"],
                          "MAX_QUEUED_EVALUATION_VALUES") from None
    if any(recorded):
        record_gate_verdicts(current_app.extensions["results"], current_tenant(), doc)
    return _render(doc, fmt)  # an engine error above is the app's error handler's


def _check_measure_names(req: dict) -> None:
    """422 naming ``measures``, with the registry's suggestions, for a measure name it does
    not resolve (before any input is read). Before any name is parsed, the names asked for
    and the gates' are held to an evaluation's parameter bound (a 100 MB ``P.1,1,1,…`` is
    refused unparsed: :func:`service.enqueue.check_measure_parameters`)."""
    from cranfield.errors import MeasureError
    from cranfield.measures.names import parse_measure

    gate = req.get("gate")
    gates = [] if gate is None else gate if isinstance(gate, list) else [gate]
    check_measure_parameters([*(req.get("measures") or ()), *(g["measure"] for g in gates)])
    for name in req.get("measures") or []:
        try:
            parse_measure(name, req["options"]["profile"])
        except MeasureError as exc:
            raise Problem(422, "Unknown measure", str(exc), kind="unknown-measure",
                          errors={"measures": [str(exc)]},
                          extra={"suggestions": exc.suggestions}) from None


def _render(doc: dict, fmt: str) -> Response:
    if fmt == "text/html":
        return Response(render_comparison(doc), mimetype="text/html")
    if fmt == "text/plain":
        from cranfield.compare.comparison_text import format_text

        return Response(format_text(doc), mimetype="text/plain")
    return Response(orjson.dumps(doc), mimetype="application/json")


def _enqueue_comparison(req: dict, spec: ComparisonJob, names: list[str]) -> Response:
    """Store inline runs (and qrels) under their own keys; the job carries the keys and the
    ids of finished evaluations, never the inputs."""
    backend = current_app.extensions["cranfield"]
    cfg = current_app.config
    job_id, carried = submission(req)
    runs = []
    for i, (name, entry) in enumerate(zip(names, req["runs"], strict=True)):
        if entry.get("result_id"):
            runs.append({"name": name, "result_id": entry["result_id"],
                         **({"field": entry["field"]} if entry.get("field") else {})})
            continue
        if entry.get("evaluation_id"):
            runs.append({"name": name, "evaluation_id": entry["evaluation_id"]})
            continue
        data, fmt = serialised(entry["run"], "run", f"runs[{i}]")
        runs.append({"name": name, "run_format": fmt, "run_key": backend.store.put_blob(
            f"run-{uuid.uuid4().hex}", data, cfg["INPUT_TTL"])})
    backend.submit(dataclasses.replace(spec, runs=runs, **carried), job_id)
    return accepted(job_id)
