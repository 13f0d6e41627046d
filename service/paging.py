"""Query parameters: every one of every API route held to one grammar before the route runs
(:func:`check_query`), and those of the listing routes (``GET /v1/qrels``, ``/v1/systems``, a
system's results and trend): integers in a range, a page's ``offset`` and ``limit`` (at most
MAX_PAGE_ITEMS), and the link to the next page; 400 naming the parameter."""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes, urlencode

from flask import current_app, request

from .problems import Problem


def bad_parameter(name: str, sentence: str) -> Problem:
    return Problem(400, "Invalid parameter", f"{name}: {sentence}", kind="invalid-parameter",
                   errors={name: [sentence]})


# C0 controls, DEL and C1 controls: PostgreSQL's text cannot hold NUL (a 500 there, issue #27),
# and none of them belongs in a name, a tag, a measure or a number
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# an integer as the contract writes it: ASCII decimal digits, nothing else (no parameter
# takes a negative one). Python's int() also takes "１" (fullwidth), "1_0", "+5" and " 5 ":
# each read as a number the client did not write (issue #27). 20 digits are past any bound.
INTEGER = re.compile(r"[0-9]{1,20}")


def _shown(text: str, most: int = 40) -> str:
    """``text`` as a sentence quotes it: controls escaped, cut at ``most`` characters."""
    return repr(text if len(text) <= most else text[:most] + "…")


def integer(name: str, default: int, low: int, high: int) -> int:
    """The query parameter ``name`` as an integer ``low..high`` (``default`` when absent),
    written in ASCII decimal digits and nothing else."""
    text = request.args.get(name)
    if text is None:
        return default
    if not INTEGER.fullmatch(text):
        raise bad_parameter(name, f"an integer {low}..{high} in ASCII decimal digits "
                            f"(no sign, space, underscore or other digits): got {_shown(text)}")
    value = int(text)
    if not low <= value <= high:
        raise bad_parameter(name, f"an integer {low}..{high}")
    return value


# a boolean written as text (a query parameter, a form field): one of these words, in any
# ASCII case, the multipart forms' rule; anything else is refused, never read as false
BOOLEAN_WORDS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def boolean_word(text: str) -> bool | None:
    """``text`` as :data:`BOOLEAN_WORDS` reads it, or None when it is none of them."""
    return BOOLEAN_WORDS.get(text.lower()) if text.isascii() else None


def boolean(name: str, default: bool) -> bool:
    """The query parameter ``name`` as a boolean (``default`` when absent): 400 naming it
    when it is not one of :data:`BOOLEAN_WORDS`."""
    text = request.args.get(name)
    if text is None:
        return default
    value = boolean_word(text)
    if value is None:
        raise bad_parameter(name, f"true or false: got {_shown(text)}")
    return value


def check_query() -> None:
    """A ``before_request`` hook: every query parameter of every API route (``/v1/...``) is
    UTF-8 once percent-decoded, holds no control character (C0, DEL, C1) in its name or
    value, and is given at most once; else 400 naming it, before the route reads anything
    (so no route, and no database, sees such a value: one check, not one per route). The
    query is read here from its raw bytes: werkzeug keeps an undecodable ``%FF`` as the text
    "%FF" and takes the first of a repeated parameter silently. A path no route matches is
    left to its 404 or 405."""
    raw = request.query_string
    if not raw or request.url_rule is None or not request.path.startswith("/v1/"):
        return
    seen: set[str] = set()
    for piece in raw.split(b"&"):
        if not piece:
            continue
        key_bytes, _, value_bytes = piece.partition(b"=")
        key = _decoded(key_bytes, None)
        value = _decoded(value_bytes, key)
        if CONTROL.search(key):
            raise bad_parameter(_escaped(key), "a parameter name with a control character "
                                "(C0, DEL or C1) in it; no parameter has one")
        if CONTROL.search(value):
            raise bad_parameter(key, "holds a control character (C0, DEL or C1: NUL, a line "
                                f"break, a tab...): got {_shown(value)}")
        if key in seen:
            raise bad_parameter(key, "given more than once; give it once")
        seen.add(key)


def _decoded(data: bytes, key: str | None) -> str:
    """One side of a ``name=value`` pair, as werkzeug reads it (``+`` a space,
    percent-decoded), but strictly UTF-8: 400 naming the parameter (or saying it is a
    name) otherwise."""
    try:
        return unquote_to_bytes(data.replace(b"+", b" ")).decode("utf-8")
    except UnicodeDecodeError:
        if key is None:
            raise bad_parameter(_escaped(data.decode("latin-1")), "a parameter name that is "
                                "not UTF-8 once percent-decoded") from None
        raise bad_parameter(key, "not UTF-8 once percent-decoded") from None


def _escaped(name: str) -> str:
    """A parameter's name as the problem's ``errors`` names it: controls escaped."""
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", name)


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
