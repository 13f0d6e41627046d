"""``GET /v1/jobs/{job_id}`` (status, timestamps, result or problem) and ``DELETE`` (cancel)."""

from __future__ import annotations

import re

import orjson
from flask import Blueprint, Response, current_app

from .problems import Problem

bp = Blueprint("jobs", __name__, url_prefix="/v1/jobs")
JOB_ID = re.compile(r"^[0-9a-f]{32}$")


def _find(job_id: str) -> dict:
    job = current_app.extensions["cranfield"].job(job_id) if JOB_ID.match(job_id) else None
    if job is None:
        raise Problem(404, "Not Found", f"no job {job_id!r} (unknown, or its result expired)",
                      kind="not-found")
    return job


def present(job: dict) -> dict:
    """A job as the API shows it: a failure reason is a full RFC 9457 problem."""
    if "problem" in job:
        p = job["problem"]
        job = dict(job, problem={"type": "https://cranfield.dev/problems/job-failed",
                                 "title": p.get("title", "Job failed"),
                                 "status": p.get("status", 422), "detail": p.get("detail", ""),
                                 **({"errors": p["errors"]} if p.get("errors") else {})})
    return job


@bp.get("/<job_id>")
def get_job(job_id: str):
    return Response(orjson.dumps(present(_find(job_id))), mimetype="application/json")


@bp.delete("/<job_id>")
def cancel_job(job_id: str):
    _find(job_id)
    current_app.extensions["cranfield"].cancel(job_id)
    return Response(orjson.dumps(present(_find(job_id))), status=202,
                    mimetype="application/json")
