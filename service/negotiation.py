"""Content negotiation: which of a route's representations the client's ``Accept`` prefers;
and the headers every answer carries whatever its representation (``security_headers``)."""

from __future__ import annotations

import base64
import hashlib
import re

from flask import Response, request

from cranfield.reports.html_page import CSP as PAGE_CSP

from .problems import Problem

# Directives a <meta> cannot carry (frame-ancestors) or that no page here needs: added to
# every page's policy. No page is framed, none sets a <base> or submits a form.
_NO_FRAMES = "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
#: The report, trend and job pages (cranfield/reports/html_report.py, html_trend.py,
#service/jobs.py): : self-contained, inline <style> only, data: images, no script; the same policy
#as their own : <meta>, sent as a header so that it holds for the pages without one too (a job's
#progress : page).
PAGE_POLICY = f"{PAGE_CSP}; {_NO_FRAMES}"
#: Swagger UI at /docs/ (flask-swagger-ui): its scripts, styles and icons from /docs/, one
#: inline script (its configuration, allowed by its hash: it names the page's own URL, so the
#: hash is taken per answer), the contract fetched from /openapi.yaml and the API called from
#: the page ("Try it out") on this origin; React sets style attributes.
DOCS_POLICY = ("default-src 'none'; script-src 'self'{hashes}; "
               "style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
               + _NO_FRAMES)
_INLINE_SCRIPT = re.compile(rb"<script>(.*?)</script>", re.S)


def negotiate(offers: list[str], described: str | None = None) -> str:
    """The best of ``offers`` for the request's ``Accept`` (the first when it has none); 406,
    saying what is available (``described``, else the media types), when none is acceptable."""
    accept = request.environ.get("HTTP_ACCEPT")
    if not accept or accept == "*/*" or accept == offers[0]:
        # what most clients send (curl: */*; libraries: nothing or JSON), answered without
        # parsing the header: best_match would pick the first offer too
        return offers[0]
    best = request.accept_mimetypes.best_match(offers)
    if best is None:
        raise Problem(406, "Not Acceptable", f"this resource is available as "
                      f"{described or ', '.join(offers)}", kind="not-acceptable")
    return best


def security_headers(response: Response) -> Response:
    """An ``after_request`` hook: every answer says ``X-Content-Type-Options: nosniff`` (a
    browser takes each body as its Content-Type says, never as what it looks like); every
    HTML answer, whichever route or status, carries its Content-Security-Policy as a header
    (the report pages also have it in a <meta>, which a saved file keeps)."""
    response.headers["X-Content-Type-Options"] = "nosniff"
    if response.mimetype == "text/html":
        response.headers["Content-Security-Policy"] = _page_policy(response)
    return response


def _page_policy(response: Response) -> str:
    if request.blueprint != "docs":
        return PAGE_POLICY
    hashes = ""
    if not response.is_streamed:  # a file sent as it is read (oauth2-redirect.html): no inline
        for script in _INLINE_SCRIPT.findall(response.get_data()):
            digest = base64.b64encode(hashlib.sha256(script).digest()).decode()
            hashes += f" 'sha256-{digest}'"
    return DOCS_POLICY.format(hashes=hashes)
