"""Query parameters of the listing routes (``GET /v1/qrels``, ``/v1/systems``, a system's
results and trend): integers in a range, a page's ``offset`` and ``limit`` (at most
MAX_PAGE_ITEMS), and the link to the next page; 400 naming the parameter."""

from __future__ import annotations

from urllib.parse import urlencode

from flask import current_app, request

from .problems import Problem


def bad_parameter(name: str, sentence: str) -> Problem:
    return Problem(400, "Invalid parameter", f"{name}: {sentence}", kind="invalid-parameter",
                   errors={name: [sentence]})


def integer(name: str, default: int, low: int, high: int) -> int:
    """The query parameter ``name`` as an integer ``low..high`` (``default`` when absent)."""
    text = request.args.get(name, str(default))
    try:
        value = int(text)
    except ValueError:
        raise bad_parameter(name, f"an integer {low}..{high}") from None
    if not low <= value <= high:
        raise bad_parameter(name, f"an integer {low}..{high}")
    return value


def page() -> tuple[int, int]:
    """offset (below 2^53: exact in any JSON reader) and limit (1..MAX_PAGE_ITEMS, default
    50)."""
    most = current_app.config["MAX_PAGE_ITEMS"]
    return integer("offset", 0, 0, 2**53 - 1), integer("limit", min(50, most), 1, most)


def next_page(path: str, filters: dict, offset: int, limit: int, total: int) -> str | None:
    """The link to the page after this one (None on the last)."""
    if offset + limit >= total:
        return None
    return f"{path}?" + urlencode({**filters, "offset": offset + limit, "limit": limit})
