"""``GET /v1/jobs/{job_id}`` (status, timestamps, result or problem) and ``DELETE`` (cancel)."""

from __future__ import annotations

import html
import re

import orjson
from flask import Blueprint, Response, current_app

from .auth import current_tenant
from .negotiation import negotiate
from .problems import Problem

bp = Blueprint("jobs", __name__, url_prefix="/v1/jobs")
JOB_ID = re.compile(r"^[0-9a-f]{32}$")


def _find(job_id: str) -> dict:
    job = current_app.extensions["cranfield"].job(job_id) if JOB_ID.match(job_id) else None
    # another tenant's job is answered as if it did not exist
    if job is not None and job.get("tenant") != current_tenant():
        job = None
    if job is None:
        raise Problem(404, "Not Found", f"no job {job_id!r} (unknown, or its result expired)",
                      kind="not-found")
    return job


def present(job: dict) -> dict:
    """A job as the API shows it: a failure reason is a full RFC 9457 problem; whose it is
    stays inside."""
    job = {k: v for k, v in job.items() if k != "tenant"}
    if "problem" in job:
        p = job["problem"]
        job = dict(job, problem={"type": "https://cranfield.dev/problems/job-failed",
                                 "title": p.get("title", "Job failed"),
                                 "status": p.get("status", 422), "detail": p.get("detail", ""),
                                 **({"errors": p["errors"]} if p.get("errors") else {}),
                                 **({"code": p["code"]} if p.get("code") else {}),
                                 # work over a budget: its name and factors, as the
                                 # synchronous 422 gives them (issue #27)
                                 **({"budget": p["budget"]} if p.get("budget") else {})})
    return job


@bp.get("/<job_id>")
def get_job(job_id: str):
    """The job as JSON; with ``Accept: text/html`` (what a browser sends) its report page;
    with ``text/plain`` or ``text/csv`` a finished job's result rendered as the synchronous
    ``POST`` renders it (an evaluation: trec_eval's text or CSV; a comparison: its text),
    so a client fetches a queued result in the format it asked for instead of sending the
    run again."""
    job = _find(job_id)
    fmt = negotiate(["application/json", "text/html", "text/plain", "text/csv"],
                    "application/json, text/html (its report page), or once finished "
                    "text/plain or text/csv (its result)")
    if fmt == "text/html":
        return _page(job)
    if fmt in ("text/plain", "text/csv"):
        return _rendered(job, fmt)
    return Response(orjson.dumps(present(job)), mimetype="application/json")


def _rendered(job: dict, fmt: str) -> Response:
    """A finished job's result as text: what ``POST /v1/evaluations`` (or
    ``/v1/comparisons``) answers with ``Accept: fmt``, byte for byte; 409 while the job has
    no result, 406 for CSV of a comparison."""
    from cranfield.reports.jg_document import document_jg, is_jg_document
    from cranfield.reports.trec_format import document_evaluation, format_csv, format_trec

    result = job.get("result")
    if job.get("status") != "finished" or result is None:
        status = job.get("status")
        raise Problem(409, "Job not finished", f"job {job['id']} is {status}: its result can "
                      f"be rendered as {fmt} once it has finished (poll it as "
                      "application/json)", kind="job-not-finished",
                      errors={"status": [f"is {status}, not finished"]})
    if job.get("kind") == "pool":  # what POST /v1/pools answers as text/plain
        if fmt == "text/csv":
            raise Problem(406, "Not Acceptable", "a pool is available as application/json, "
                          "text/html or text/plain", kind="not-acceptable")
        from cranfield.compare.pooling import format_pool

        return Response(format_pool(result), mimetype="text/plain")
    if job.get("kind") == "batch":  # what POST /v1/evaluations/batch answers as text/plain
        if fmt == "text/csv":
            raise Problem(406, "Not Acceptable", "a batch evaluation is available as "
                          "application/json, text/html or text/plain", kind="not-acceptable")
        from .evaluations_batch import batch_text

        docs = result["evaluations"]
        return Response(batch_text([document_evaluation(d) for d in docs],
                                   per_topic="per_topic" in docs[0]), mimetype="text/plain")
    if "pairs" in result:  # a comparison
        if fmt == "text/csv":
            raise Problem(406, "Not Acceptable", "a comparison is available as "
                          "application/json, text/html or text/plain", kind="not-acceptable")
        from cranfield.compare.comparison_text import format_text

        return Response(format_text(result), mimetype="text/plain")
    per_topic = "per_topic" in result
    if is_jg_document(result):  # judgment groups, preferences: trec_eval's -R text
        if fmt == "text/csv":
            raise Problem(406, "Not Acceptable", "an evaluation against judgment groups or "
                          "preferences is available as application/json or text/plain",
                          kind="not-acceptable")
        from cranfield.reports.jg_text import format_jg

        return Response(format_jg(document_jg(result), per_topic=per_topic),
                        mimetype="text/plain")
    ev = document_evaluation(result)
    text = (format_trec(ev, per_topic=per_topic) if fmt == "text/plain"
            else format_csv(ev, per_topic=per_topic))
    headers = {"Cranfield-Result-Id": result["recorded"]["id"]} \
        if isinstance(result.get("recorded"), dict) else {}
    return Response(text, mimetype=fmt, headers=headers)


@bp.get("/<job_id>/report")
def get_job_report(job_id: str):
    """The report page of a job: the evaluation's or comparison's page once it has finished
    (titled by its runs, the job's id under the title), else a page that says how far it is
    and reloads itself."""
    return _page(_find(job_id))


def _page(job: dict) -> Response:
    from cranfield.reports.html_report import render_comparison, render_evaluation

    result = job.get("result")
    if job.get("status") == "finished" and result is not None and job.get("kind") == "pool":
        return Response(_pool_page(job), mimetype="text/html")
    if job.get("status") == "finished" and result is not None and job.get("kind") == "batch":
        return Response(_batch_page(job), mimetype="text/html")
    if job.get("status") == "finished" and result is not None:
        from cranfield.reports.jg_document import is_jg_document

        if is_jg_document(result):  # as POST /v1/evaluations answers Accept: text/html
            raise Problem(406, "Not Acceptable", "an evaluation against judgment groups or "
                          "preferences is available as application/json or text/plain",
                          kind="not-acceptable")
        # titled by what was evaluated ("Evaluation of RUNID", "Comparison: a vs b"): the
        # renderers' own titles; the job's id is the line under the title
        render = render_comparison if "pairs" in result else render_evaluation
        return Response(render(result, subtitle=f"Cranfield job {job['id']}"),
                        mimetype="text/html")
    status = html.escape(str(job.get("status")))
    detail = html.escape(str((job.get("problem") or {}).get("detail", "")))
    refresh = '<meta http-equiv="refresh" content="2">' if status in ("queued", "started") \
        else ""
    page = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">{refresh}'
            f"<title>Cranfield job {html.escape(job['id'])}</title></head><body>"
            f"<h1>Job {html.escape(job['id'])}: {status}</h1><p>{detail}</p></body></html>")
    return Response(page, mimetype="text/html")


def _pool_page(job: dict) -> str:
    """A finished pool job's page: its runs, depth and each topic's pool size (the documents
    themselves: the job as text/plain or JSON)."""
    result = job["result"]
    rows = "".join(f"<tr><td>{html.escape(str(t))}</td><td>{n}</td></tr>"
                   for t, n in result.get("sizes", {}).items())
    runs = html.escape(", ".join(map(str, result.get("runs", []))))
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>Pool: {runs}</title></head><body><h1>Pool of {runs} at depth "
            f"{int(result.get('depth', 0))}</h1><p>Cranfield job {html.escape(job['id'])}: "
            f"{int(result.get('total', 0))} documents to judge</p><table><tr><th>topic</th>"
            f"<th>documents</th></tr>{rows}</table></body></html>")


def _batch_page(job: dict) -> str:
    """A finished batch job's page: each run's name, runid and aggregate values, a row per
    run (each run's whole document: the job as JSON; its text: as text/plain)."""
    docs = job["result"]["evaluations"]
    keys = list(dict.fromkeys(k for d in docs for k in d.get("aggregate", {})))
    head = "".join(f"<th>{html.escape(k)}</th>" for k in keys)

    def cell(value) -> str:
        return "" if value is None else html.escape(
            f"{value:.4f}" if isinstance(value, float) else str(value))

    rows = "".join(
        f"<tr><td>{html.escape(str(d['name']))}</td>"
        f"<td>{html.escape(str(d.get('provenance', {}).get('runid', '')))}</td>"
        + "".join(f"<td>{cell(d.get('aggregate', {}).get(k))}</td>" for k in keys) + "</tr>"
        for d in docs)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>Batch evaluation of {len(docs)} runs</title></head><body>"
            f"<h1>Batch evaluation of {len(docs)} runs</h1><p>Cranfield job "
            f"{html.escape(job['id'])}</p><table><tr><th>name</th><th>runid</th>{head}</tr>"
            f"{rows}</table></body></html>")


@bp.delete("/<job_id>")
def cancel_job(job_id: str):
    _find(job_id)
    current_app.extensions["cranfield"].cancel(job_id)
    return Response(orjson.dumps(present(_find(job_id))), status=202,
                    mimetype="application/json")
