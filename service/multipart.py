"""multipart/form-data bodies, read whole and cut at their boundaries (RFC 7578).

werkzeug's streaming parser handles every shape, but walks a 240 MB upload through Python in
small pieces (~0.5 s here). A body that is simple — parts with a Content-Disposition naming
them, no ``filename*`` encodings — is cut with ``bytes.find`` instead; anything else returns
``None`` and werkzeug parses it, so the answer never depends on which parser ran.
"""

from __future__ import annotations

import re

from flask import request
from werkzeug.datastructures import MultiDict

from .problems import Problem

_PARAM = re.compile(r';\s*([A-Za-z0-9_*-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)')
MAX_PARTS = 1000  # werkzeug's default


class Uploads(MultiDict):
    """Uploaded files' contents by field name, with their file names (``filenames``) and
    media types (``content_types``, lower case without parameters, None when the part has
    no Content-Type), in the same order, whichever parser read them."""

    def __init__(self, items=()):
        super().__init__()
        self.filenames: MultiDict = MultiDict()
        self.content_types: MultiDict = MultiDict()
        for name, filename, data, content_type in items:
            self.add_file(name, filename, data, content_type)

    def add_file(self, name: str, filename: str | None, data,
                 content_type: str | None = None) -> None:
        self.add(name, data)
        self.filenames.add(name, filename)
        self.content_types.add(name, media_type(content_type))


def media_type(value: str | None) -> str | None:
    """``type/subtype`` of a Content-Type value, lower case (None for none)."""
    if not value:
        return None
    return value.split(";", 1)[0].strip().lower() or None


def parse(body: bytes, boundary: str, max_field_bytes: int | None):
    """(fields, files): a werkzeug MultiDict of field values (str) and :class:`Uploads` (file
    values memoryviews of ``body``: a copy of a 240 MB upload costs 0.2 s here), or ``None``
    for anything this reader does not take (the caller asks werkzeug)."""
    if not boundary or len(boundary) > 70 or not boundary.isascii():
        return None  # werkzeug's business (see check_boundary: a request never gets here)
    delimiter = b"--" + boundary.encode("ascii")
    pos = body.find(delimiter)
    if pos < 0 or (pos > 0 and body[pos - 2:pos] != b"\r\n"):
        return None
    fields: MultiDict = MultiDict()
    files = Uploads()
    view = memoryview(body)
    for number in range(1, MAX_PARTS + 2):
        after = pos + len(delimiter)
        tail = body[after:after + 2]
        if tail == b"--":
            return fields, files
        if tail != b"\r\n":
            return None
        head_end = body.find(b"\r\n\r\n", after + 2)
        if head_end < 0:
            return None
        end = head_end + 2
        while True:  # a delimiter is followed by CRLF or "--"; "--boundaryX" is content
            end = body.find(b"\r\n" + delimiter, end + 2)
            if end < 0:
                return None
            follows = body[end + 2 + len(delimiter):end + 4 + len(delimiter)]
            if follows in (b"\r\n", b"--"):
                break
            if follows[:1] in (b" ", b"\t"):
                return None  # transport padding: werkzeug's business
        disposition = _disposition(body[after + 2:head_end])
        if disposition is None:
            return None
        name, filename, content_type = disposition
        if not name:
            raise nameless(f"part {number}" + ("" if filename is None else
                                              f" (filename {filename!r})"))
        if filename is not None:
            files.add_file(name, filename, view[head_end + 4:end], content_type)
        else:
            if max_field_bytes is not None and end - head_end - 4 > max_field_bytes:
                raise Problem(413, "Request Entity Too Large", f"form field {name!r} exceeds "
                              f"{max_field_bytes} bytes; send it as a file",
                              kind="too-large", errors={name: ["too large for a form field"]})
            try:
                fields.add(name, body[head_end + 4:end].decode("utf-8"))
            except UnicodeDecodeError:
                return None
        pos = end + 2
    return None  # more parts than werkzeug would take: it says so


# a form's numbers as JSON writes them: ASCII digits, a minus, a fraction and an exponent for
# a float; int() and float() also take "１" (fullwidth), "1_0", "+5", " 5 " and float() "nan"
# and "inf": each read as a number the client did not write (issue #27)
_FORM_NUMBER = {int: re.compile(r"-?[0-9]+"),  # the schema bounds it, naming the option
                float: re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,4})?")}


#: why a form's ``options`` field is refused, whatever else the form holds (review R2 F9: it
#: was dropped when an option field was present): a form flattens the options
OPTIONS_FIELD = ("a form takes each option as a field of its own (complete_topics, depth, "
                 "topic_metadata...), not an options object: send the body as JSON to give "
                 "options as an object")


def form_number(value: str, kind: type = int) -> int | float:
    """A form field's ``int`` or ``float``, written as JSON writes one; ValueError else."""
    if not _FORM_NUMBER[kind].fullmatch(value):
        raise ValueError(f"not {'an integer' if kind is int else 'a number'} in ASCII digits: "
                         f"{value[:40]!r}")
    return kind(value)


def nameless(part: str) -> Problem:
    """422 naming a part without a field name (``part 2 (filename 'r.txt')``): werkzeug
    files it under None (or ""), where no route looks for it, and a problem keyed by None
    could not be encoded (a 500, issue #27)."""
    sentence = ("no name: every part needs Content-Disposition: form-data; name=\"...\" "
                "(run, qrels, measures...)")
    return Problem(422, "Invalid request", f"{part}: {sentence}", kind="invalid-request",
                   errors={part: [sentence]})


def check_parts(form: MultiDict, files, repeatable: frozenset[str] | set[str] = (),
                known: frozenset[str] | set[str] | None = None) -> None:
    """422 unless every part of a parsed form has a name, each name not in ``repeatable``
    comes once, as a field or as a file (a second ``run`` file was ignored and a repeated
    ``run`` field had one of its values used, silently: issue #27), and, given ``known``,
    every name is one of those. ``files``: :class:`Uploads` or werkzeug's ``request.files``
    (either parser's output: werkzeug keeps nameless parts under None or "")."""
    for key in (None, ""):
        names = (files.filenames.getlist(key) if isinstance(files, Uploads)
                 else [f.filename for f in files.getlist(key)])
        for filename in names:
            raise nameless(f"part (filename {filename!r})" if filename else "part (a file)")
        if key in form:
            raise nameless("part (a field)")
    if known is not None:
        unknown = sorted({k for k, _ in [*form.items(multi=True), *files.items(multi=True)]}
                         - set(known))
        if unknown:
            expected = ", ".join(sorted(known))
            raise Problem(422, "Invalid request", f"unknown parts: {', '.join(unknown)} "
                          f"(expected {expected})", kind="invalid-request",
                          errors={k: [f"unknown part (expected {expected})"]
                                  for k in unknown})
    counts: dict[str, int] = {}
    for key, _ in [*form.items(multi=True), *files.items(multi=True)]:
        counts[key] = counts.get(key, 0) + 1
    repeated = sorted(k for k, n in counts.items() if n > 1 and k not in repeatable)
    if repeated:
        raise Problem(422, "Invalid request", "parts repeated: " + ", ".join(repeated)
                      + "; each is taken once", kind="invalid-request",
                      errors={k: [f"given {counts[k]} times (as fields or files); give it "
                                  "once"] for k in repeated})


def check_boundary() -> None:
    """400 naming the Content-Type for a multipart/form-data request whose boundary is
    missing, empty or not ASCII (RFC 2046 section 5.1.1: 1-70 ASCII characters; an RFC 2231
    ``boundary*=utf-8''%E2%82%AC`` decodes to a character no body can be cut at). werkzeug
    would answer such a body with an empty form (and the route with "run: missing"), this
    module could not encode it: both parsers are spared it, whatever the body's size. A
    ``before_request`` hook (service/app.py), after the API-key check."""
    if request.method not in ("POST", "PUT", "PATCH") or \
            request.mimetype != "multipart/form-data":
        return  # only the routes that take a body (their contract lists 400)
    boundary = request.mimetype_params.get("boundary")
    if boundary and boundary.isascii():
        return
    found = "no boundary" if boundary is None else (
        "an empty boundary" if not boundary else f"the boundary {boundary!r}, which is not ASCII")
    raise Problem(400, "Malformed request", f"multipart/form-data needs a boundary parameter "
                  f"of 1-70 ASCII characters (RFC 2046); the Content-Type has {found}",
                  kind="malformed-request",
                  errors={"Content-Type": [f"boundary: {found}; expected 1-70 ASCII "
                                           "characters"]})


def _disposition(head: bytes):
    """(name, filename or None, Content-Type or None) from a part's headers, or None if they
    are not plain."""
    try:
        lines = head.decode("utf-8").split("\r\n")
    except UnicodeDecodeError:
        return None
    found = None
    content_type = None
    for line in lines:
        key, sep, value = line.partition(":")
        if not sep:
            return None
        if key.strip().lower() == "content-type":
            content_type = value.strip()
            continue
        if key.strip().lower() != "content-disposition":
            continue
        kind, _, rest = value.strip().partition(";")
        if kind.strip().lower() != "form-data":
            return None
        params = {}
        for pname, pvalue in _PARAM.findall(";" + rest):
            if pname.endswith("*"):
                return None  # RFC 5987 encodings: werkzeug's business
            if pvalue.startswith('"'):
                params[pname.lower()] = re.sub(r"\\(.)", r"\1", pvalue[1:-1])
            else:
                params[pname.lower()] = pvalue.strip()
        # no name: kept as None (an empty name as ""), for parse to refuse naming the part
        found = (params.get("name"), params.get("filename"))
    return found + (content_type,) if found is not None else None


def measure_list(values: list[str]) -> list[str]:
    """The measure names of form fields (repeated, or comma-separated in one field) as the
    JSON body's list would hold them: a comma inside parentheses (``nDCG(a=1,b=2)@10``) or
    one that continues a trec_eval parameter list (``P.5,10``, ``Rprec_mult_avgjg.0.5,0.25``:
    a piece that is not a measure name itself) does not separate names (review R1 F12)."""
    from cranfield.errors import MeasureError
    from cranfield.measures.names import parse_measure

    out: list[str] = []
    for value in values:
        pieces, depth, start = [], 0, 0
        for i, ch in enumerate(value):
            depth += (ch == "(") - (ch == ")")
            if ch == "," and depth == 0:
                pieces.append(value[start:i])
                start = i + 1
        pieces.append(value[start:])
        names: list[str] = []
        for piece in (p.strip() for p in pieces):
            if not piece:
                continue
            if names and "." in names[-1] and not piece[:1].isalpha():
                try:
                    parse_measure(piece)
                except MeasureError:  # a parameter value: it continues the list
                    names[-1] += "," + piece
                    continue
            names.append(piece)
        out += names
    return out
