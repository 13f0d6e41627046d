"""Content negotiation: which of a route's representations the client's ``Accept`` prefers."""

from __future__ import annotations

from flask import request

from .problems import Problem


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
