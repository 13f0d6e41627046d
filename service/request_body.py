"""Reading a request body whole, and discarding one no route read."""

from __future__ import annotations

import io

from flask import current_app, request
from werkzeug.exceptions import ClientDisconnected, RequestEntityTooLarge

from .problems import Problem

# environ key: set once the body has been read (or found too large), so it is not drained
READ = "cranfield.body_read"
CHUNK = 1 << 20


def read_body() -> bytes:
    """The body as bytes, in one read of the server's input when its length is declared.

    werkzeug's ``get_data`` reads through a limited stream in many small pieces and joins
    them: for a 120 MB evaluation that costs ~0.1-0.3 s more than one ``read(length)``.
    A chunked body has one by now (``buffer_chunked_body``); without one, the body is read
    up to the limit and one byte more: longer than ``MAX_CONTENT_LENGTH`` is 413, never cut
    at the limit (as werkzeug's ``get_data`` cuts it, silently)."""
    request.environ[READ] = True
    length = request.content_length
    limit = current_app.config.get("MAX_CONTENT_LENGTH")
    if length is None:
        return _read_unsized(limit)
    if limit is not None and length > limit:
        raise RequestEntityTooLarge()
    data = request.environ["wsgi.input"].read(length) if length else b""
    if len(data) != length:
        raise Problem(400, "Incomplete body", f"Content-Length says {length} bytes; "
                      f"{len(data)} arrived", kind="malformed-request",
                      errors={"body": [f"{len(data)} of {length} bytes"]})
    return data


def _read_unsized(limit: int | None) -> bytes:
    """A body without a Content-Length. Only a server that ends the stream itself (it sets
    ``wsgi.input_terminated``, as gunicorn does for chunked bodies) is read; from any other
    the body is empty, as werkzeug has it (reading could block past the body's end)."""
    environ = request.environ
    if not environ.get("wsgi.input_terminated"):
        return b""
    stream = environ["wsgi.input"]
    chunks: list[bytes] = []
    total = 0
    while True:
        try:
            chunk = stream.read(CHUNK)
        except Exception as exc:  # the server could not read the chunks (gunicorn's
            # InvalidChunkSize, ChunkMissingTerminator...): the client's framing, not a bug
            raise Problem(400, "Malformed request", "the chunked body could not be read: "
                          f"{exc.__class__.__name__}", kind="malformed-request",
                          errors={"body": [f"malformed chunked encoding "
                                           f"({exc.__class__.__name__})"]}) from None
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if limit is not None and total > limit:
            raise RequestEntityTooLarge()
        chunks.append(chunk)


def _chunked(environ) -> bool:
    return "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()


def buffer_chunked_body() -> None:
    """A ``before_request`` hook: a body sent without a Content-Length (chunked) is read
    here, whole and at most ``MAX_CONTENT_LENGTH`` bytes (413 past it, nothing kept), and
    the request goes on with it as a body of known length. So every reader (``read_body``,
    werkzeug's form parser for ``request.files``, the size checks) sees what it sees for a
    Content-Length body: werkzeug's own reads of a chunked body stop at the limit silently
    (``get_data``: a body cut short and stored) or 413 halfway through a form, leaving its
    spooled files open."""
    environ = request.environ
    if request.content_length is not None or not _chunked(environ):
        return
    environ[READ] = True
    data = _read_unsized(current_app.config.get("MAX_CONTENT_LENGTH"))
    environ["wsgi.input"] = io.BytesIO(data)  # shares ``data``: read whole, not copied
    environ["CONTENT_LENGTH"] = str(len(data))
    del environ["HTTP_TRANSFER_ENCODING"]
    for cached in ("content_length", "stream"):  # werkzeug's, if computed already
        request.__dict__.pop(cached, None)


def discard_unread_body() -> None:
    """Read and drop a body the route did not read (an early 401, 403, 429, 415...), so the
    connection can serve the client's next request as the response's keep-alive promised:
    gunicorn drains at most 64 KiB of it and otherwise closes the connection. At most
    ``MAX_CONTENT_LENGTH`` bytes are read: a body declared longer is left alone (gunicorn
    closes the connection, and says so: see ``pre_request`` in service/gunicorn.conf.py)."""
    environ = request.environ
    if environ.get(READ):
        return
    length = request.content_length
    if length is None:
        if not _chunked(environ):
            return  # no body
        if not environ.get("wsgi.input_terminated"):
            return  # a server that does not end the stream: reading could block
    elif length == 0:
        return
    limit = current_app.config.get("MAX_CONTENT_LENGTH")
    if length is not None and limit is not None and length > limit:
        return
    environ[READ] = True
    # werkzeug's stream: at most Content-Length bytes (or the limit, for a chunked body),
    # less whatever was read through it already (its form parser reads through it)
    stream = request.stream
    try:
        while stream.read(CHUNK):
            pass
    except (ClientDisconnected, RequestEntityTooLarge, OSError, ValueError):
        pass  # the client went away, or a chunked body goes on past the limit


def read_json_object(required: str, allowed: frozenset[str] | set[str]) -> dict:
    """The body as a JSON object holding ``required`` and nothing outside ``allowed``: 400
    for JSON that does not parse, 422 naming the missing or unknown members (the small bodies
    of ``PUT /v1/qrels/{id}`` and ``PUT /v1/systems/{name}/baseline``)."""
    import orjson

    from cranfield.inputs.json_body import loads

    try:
        # a key given twice: refused (or, a topic in qrels, merged) as TREC text reads it
        body = loads(read_body() or b"null")
    except orjson.JSONDecodeError as exc:
        raise Problem(400, "Malformed JSON", str(exc), kind="malformed-json",
                      errors={"body": [str(exc)]}) from None
    if not isinstance(body, dict) or required not in body:
        raise Problem(422, "Invalid request", f"expected {{\"{required}\": …}}",
                      kind="invalid-request", errors={required: ["Missing data"]})
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise Problem(422, "Invalid request", "unknown fields", kind="invalid-request",
                      errors={k: ["Unknown field."] for k in unknown})
    return body
