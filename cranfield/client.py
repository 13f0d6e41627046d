"""A small client for the Cranfield API (standard library only): every route the nightly job
uses, typed.

    from cranfield.client import Client
    api = Client("http://127.0.0.1:8000")
    api.put_qrels("msmarco-dev", "qrels.dev.tsv")
    doc = api.evaluate(run="run.txt", qrels_id="msmarco-dev", measures=["RR@10", "nDCG@10"],
                       record={"system": "bm25", "label": "nightly-42"})
    doc["aggregate"]["RR@10"], doc["recorded"]["id"]
    api.pin_baseline("bm25", latest=True)
    verdict = api.gate("bm25", doc["recorded"]["id"], ["nDCG@10"], ["nDCG@10:0.01"])["gate"]

A run given as a path is streamed from disk as a multipart file part (read in pieces, never
whole: a 100 MB run costs the client no 100 MB), and sent exactly once. Large bodies are
queued by the server (202); ``evaluate`` then polls the job with back-off (telling
``progress``, if given, each state) and fetches its finished result in the format asked
(the server renders a finished job as trec_eval's text or CSV), so callers see one shape
either way and the run is never sent again.

A run (or qrels) given as a pyarrow Table or a pandas/polars DataFrame (columns ``topic``,
``docid``, ``score`` / ``grade``) is sent as an Apache Arrow IPC stream part of a
multipart/form-data body (pyarrow is imported only then).

Every problem the server answers with raises :class:`ApiError` (``.status``, ``.problem``:
the RFC 9457 document); a server that cannot be reached raises ``OSError`` (urllib's
``URLError``), a job that outlasts the wait ``TimeoutError``.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .io import is_columns  # (columns, told from paths and text without importing pyarrow)
from .swapped import check_order

#: the media types ``evaluate``'s ``accept`` takes
TEXT_FORMATS = ("text/plain", "text/csv")
CHUNK = 1 << 20  # a streamed file part is read and sent this many bytes at a time


class ApiError(Exception):
    """The server answered with a problem (RFC 9457): ``status`` is the HTTP status,
    ``problem`` the problem document (a failed job's problem for a job that failed)."""

    def __init__(self, status: int, problem: dict):
        self.status = status
        self.problem = problem
        detail = str(problem.get("detail", problem.get("title", "")))
        errors = problem.get("errors") or {}
        said = ((k, " ".join(map(str, v)) if isinstance(v, list) else str(v))
                for k, v in errors.items())
        # a field and reason the detail already says (the API often says them in both)
        # are not printed twice; a field the detail does not name is ("run line 1")
        where = "; ".join(f"{k}: {text}" for k, text in said
                          if not (text in detail and (text == detail or k in detail)))
        super().__init__(f"HTTP {status}: {detail}" + (f" ({where})" if where else ""))

    @property
    def kind(self) -> str:
        """The problem type's last segment (``not-found``, ``unknown-qrels``...)."""
        return str(self.problem.get("type", "")).rsplit("/", 1)[-1]


#: the same error under the name the issue's users looked for
CranfieldAPIError = ApiError


class Text(str):
    """A text answer (trec_eval's text, CSV) with what the JSON document would have said
    beside it: ``recorded`` (``{"id", "system", "label"}`` when the evaluation was recorded,
    else None) and ``job`` (the queued job's id, else None)."""

    recorded: dict | None = None
    job: str | None = None

    @classmethod
    def of(cls, text: str, recorded: dict | None = None, job: str | None = None) -> Text:
        out = cls(text)
        out.recorded, out.job = recorded, job
        return out


def _names_a_file(value: str) -> bool:
    """Whether a str argument is a path rather than TREC text: one line that names an
    existing file or directory, or has fewer than 4 fields (a qrels line has 4, a run line 6;
    the engine's readers draw the same line)."""
    return "\n" not in value and bool(value.strip()) and (
        os.path.exists(value) or len(value.split()) < 4)


def _text_or_mapping(value: Any) -> Any:
    """Mappings pass through; a path (a PathLike, or a str that :func:`_names_a_file`) is
    read, and a missing file or a directory is an :class:`~cranfield.errors.InputError`
    rather than text sent to the server; other strings are text."""
    if isinstance(value, Mapping):
        return value
    if isinstance(value, os.PathLike) or (isinstance(value, str) and _names_a_file(value)):
        from .errors import InputError

        path = os.fspath(value)
        if os.path.isdir(path):
            raise InputError(str(path), "is a directory")
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read()
        except FileNotFoundError:
            raise InputError(str(path), "no such file") from None
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return value


def _arrow_stream(value: Any, kind: str, compression: str | None = "zstd") -> bytes:
    """A table (or, beside a table run, a qrels mapping) as an Arrow IPC stream holding the
    columns the API reads for ``kind``; its buffers zstd-compressed (M's run: 66 MB instead
    of 152, for ~0.1 s more to read on the server)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    from .columnar import to_arrow
    from .table_bounds import wanted_columns

    if isinstance(value, Mapping):
        rows = [(t, d, v) for t, docs in value.items() for d, v in docs.items()]
        table = pa.table({"topic": [r[0] for r in rows], "docid": [r[1] for r in rows],
                          ("score" if kind == "run" else "grade"): [r[2] for r in rows]})
    else:
        table = to_arrow(value, kind)
    table = table.select(wanted_columns(table.column_names, kind))
    topic = table.column("topic") if "topic" in table.column_names else None
    if topic is not None and (pa.types.is_string(topic.type) or
                              pa.types.is_large_string(topic.type)):
        # a code per row, each topic's string once: a fifth smaller at M's shape
        table = table.set_column(table.column_names.index("topic"), "topic",
                                 topic.combine_chunks().dictionary_encode())
    sink = pa.BufferOutputStream()
    options = ipc.IpcWriteOptions(compression=compression)
    with ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


ARROW_STREAM = "application/vnd.apache.arrow.stream"
TEXT_PART = "text/plain; charset=utf-8"


class Part:
    """One file part of a multipart body: its bytes, or a file on disk streamed in
    :data:`CHUNK` pieces (``path``), as it was when the part was made: its size is the
    Content-Length sent, so a file that changes while it is sent (a run still being written)
    is an :class:`~cranfield.errors.InputError` before its last piece goes, rather than a
    body shorter than announced (the server waits for the rest) or a truncated run."""

    def __init__(self, name: str, filename: str, content_type: str, *, data: bytes = b"",
                 path: str | None = None):
        self.name, self.filename, self.content_type = name, filename, content_type
        self.data, self.path = data, path
        self._stat = os.stat(path) if path is not None else None

    @property
    def size(self) -> int:
        return self._stat.st_size if self._stat is not None else len(self.data)

    def chunks(self) -> Iterator[bytes]:
        if self.path is None:
            yield self.data
            return
        left = self.size
        with open(self.path, "rb") as fh:
            while True:
                block = fh.read(min(CHUNK, left))
                left -= len(block)
                if left == 0 or not block:
                    # the last piece is held back until the file is known to be as it was
                    now = os.fstat(fh.fileno())
                    if left or fh.read(1) or now.st_mtime_ns != self._stat.st_mtime_ns:
                        self._changed(now.st_size)
                    if block:
                        yield block
                    return
                yield block

    def _changed(self, size: int) -> None:
        from .errors import InputError

        raise InputError(self.path, f"changed while it was being sent ({self.size} bytes "
                         f"when the upload began, {size} now): send it once it is "
                         "completely written")


class MultipartBody:
    """A multipart/form-data body (RFC 7578) built from plain ``fields`` and file ``parts``,
    iterated in pieces (a file part straight from disk) with its exact ``length`` known
    before a byte is sent: urllib sends an iterable body with that Content-Length as it
    comes, so the client holds one piece of the run at a time."""

    def __init__(self, fields: list[tuple[str, Any]], parts: list[Part]):
        self.boundary = f"cranfield-{uuid.uuid4().hex}"
        self.fields, self.parts = fields, parts
        self.content_type = f"multipart/form-data; boundary={self.boundary}"

    def _heads(self) -> tuple[bytes, list[bytes], bytes]:
        b = self.boundary
        fields = b"".join(f'--{b}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                          f"{value}\r\n".encode() for name, value in self.fields)
        heads = [(f'--{b}\r\nContent-Disposition: form-data; name="{p.name}"; '
                  f'filename="{p.filename}"\r\nContent-Type: {p.content_type}\r\n\r\n')
                 .encode() for p in self.parts]
        return fields, heads, f"--{b}--\r\n".encode()

    @property
    def length(self) -> int:
        fields, heads, tail = self._heads()
        return (len(fields) + sum(len(h) + p.size + 2 for h, p in zip(heads, self.parts,
                                                                        strict=True))
                + len(tail))

    def __iter__(self) -> Iterator[bytes]:
        fields, heads, tail = self._heads()
        yield fields
        for head, part in zip(heads, self.parts, strict=True):
            yield head
            yield from part.chunks()
            yield b"\r\n"
        yield tail

    def read_all(self) -> bytes:
        """The whole body (for tests and small bodies)."""
        return b"".join(self)


def _multipart(fields: list[tuple[str, Any]], files: list[tuple[str, str, bytes, str]]
               ) -> tuple[bytes, str]:
    """(body, Content-Type) of multipart/form-data with plain ``fields`` and ``files``
    (name, filename, bytes, content type), whole (tests and benchmarks build bodies so)."""
    body = MultipartBody(fields, [Part(n, f, t, data=d) for n, f, d, t in files])
    return body.read_all(), body.content_type


def _form_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _topic_metadata(value: Any):
    """``options["topic_metadata"]`` read here, by the engine's one reader (its errors name
    the line before anything is sent): a path (a PathLike, or a str naming a file), text,
    bytes, the mapping or a :class:`~cranfield.segments.TopicMetadata`. Sent as the mapping
    in a JSON body, as its text in a multipart form: the same metadata, one digest."""
    from .segments import read_topic_metadata

    if isinstance(value, str) and _names_a_file(value):
        from pathlib import Path

        value = Path(value)
    elif isinstance(value, str):
        value = value.encode("utf-8")  # text, never a path on the service's side
    return read_topic_metadata(value)


def _path_of(value: Any) -> str | None:
    """The path ``value`` names (a PathLike, or a str that :func:`_names_a_file`), checked
    to be a readable file (:class:`~cranfield.errors.InputError` otherwise), else None."""
    if not (isinstance(value, os.PathLike) or (isinstance(value, str) and _names_a_file(value))):
        return None
    from .errors import InputError

    path = os.fspath(value)
    if os.path.isdir(path):
        raise InputError(str(path), "is a directory")
    if not os.path.isfile(path):
        raise InputError(str(path), "no such file")
    if not os.access(path, os.R_OK):
        raise InputError(str(path), "cannot read: permission denied")
    return path


def _mapping_text(value: Mapping, kind: str) -> bytes:
    """A qrels mapping ({topic: {docid: grade}}) as TREC qrels text, or a run mapping
    ({topic: {docid: score}}) as TREC run text (ranks in the order given)."""
    if kind == "qrels":
        return "".join(f"{t} 0 {d} {int(g)}\n" for t, docs in value.items()
                       for d, g in docs.items()).encode()
    return "".join(f"{t} Q0 {d} {i + 1} {float(s)!r} run\n" for t, docs in value.items()
                   for i, (d, s) in enumerate(docs.items())).encode()


def _part(name: str, value: Any) -> Part:
    """``value`` (a path, a table, a mapping, TREC text or bytes) as the file part ``name``."""
    if is_columns(value):
        return Part(name, f"{name}.arrows", ARROW_STREAM, data=_arrow_stream(value, name))
    path = _path_of(value)
    if path is not None:
        return Part(name, os.path.basename(path) or name, TEXT_PART, path=path)
    if isinstance(value, Mapping):
        return Part(name, f"{name}.txt", TEXT_PART, data=_mapping_text(value, name))
    data = value if isinstance(value, bytes) else str(value).encode("utf-8")
    return Part(name, f"{name}.txt", TEXT_PART, data=data)


# trec_eval's list of parameters, ``P.5,10``: the same measures as ``P.5`` and ``P.10``
_PARAMETER_LIST = re.compile(r"([^,()\s]+)\.([^,()\s]+(?:,[^,()\s]+)+)")


def form_measures(measures: list[str] | None) -> list[str] | None:
    """``measures`` as multipart form fields can carry them: the service reads a form's
    ``measures`` as comma-separated names, so trec_eval's ``P.5,10`` goes as ``P.5`` and
    ``P.10`` (the same measures, resolved in the same order). None when a name has a comma
    no form field can carry (``nDCG(dcg=exp-log2,gains=…)``): the JSON body must."""
    if measures is None:
        return None
    out = []
    for name in measures:
        if "," not in name:
            out.append(name)
            continue
        found = _PARAMETER_LIST.fullmatch(name.strip())
        if found is None:
            return None
        out += [f"{found[1]}.{p}" for p in found[2].split(",")]
    return out


def _form_fields(fields: dict[str, Any]) -> list[tuple[str, Any]]:
    """An evaluation's JSON fields as form fields (measures repeated, options one field each,
    ``record`` as JSON text)."""
    form: list[tuple[str, Any]] = ([("per_topic", _form_value(fields["per_topic"]))]
                                   if "per_topic" in fields else [])
    if "qrels_id" in fields:
        form.append(("qrels_id", fields["qrels_id"]))
    if "topic_metadata_id" in fields:
        form.append(("topic_metadata_id", fields["topic_metadata_id"]))
    form += [("measures", m) for m in fields.get("measures", ())]
    form += [(key, value.as_text() if key == "topic_metadata" else _form_value(value))
             for key, value in fields.get("options", {}).items() if value is not None]
    if fields.get("details"):
        form.append(("details", "true"))
    if "record" in fields:
        form.append(("record", json.dumps(fields["record"])))
    return form


def _quoted(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _job_id(job: str) -> str:
    """A job's id from its id or its Location (``/v1/jobs/ID``)."""
    return job.rstrip("/").rsplit("/", 1)[-1]


Progress = Callable[[dict], None]


class Client:
    """The Cranfield API at ``base_url`` (``api_key``: sent as a Bearer token)."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 600.0):
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

    # -- plumbing ---------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, *, headers: dict | None = None,
                content_type: str = "application/json") -> tuple[int, dict, bytes]:
        """(status, headers, body bytes) of one request; ``body``: bytes, a
        :class:`MultipartBody` or a file :class:`Part` (streamed), a readable file
        (streamed; its size must be known) or anything JSON encodes. A problem answer
        raises :class:`ApiError`."""
        data: Any = None
        hdrs = {"Accept": "application/json", **(headers or {})}
        if self.api_key:
            hdrs["Authorization"] = f"Bearer {self.api_key}"
        if isinstance(body, MultipartBody):
            data = iter(body)
            hdrs["Content-Type"] = body.content_type
            hdrs["Content-Length"] = str(body.length)
        elif isinstance(body, Part):  # one file as the whole body, streamed
            data = body.chunks()
            hdrs["Content-Type"] = content_type
            hdrs["Content-Length"] = str(body.size)
        elif hasattr(body, "read"):
            data = body
            hdrs["Content-Type"] = content_type
            hdrs["Content-Length"] = str(os.fstat(body.fileno()).st_size - body.tell())
        elif body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            hdrs["Content-Type"] = content_type
        req = urllib.request.Request(self.base_url + path, data=data, method=method,
                                     headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                problem = json.loads(raw)
            except ValueError:
                problem = {"detail": raw.decode("utf-8", "replace")}
            if not isinstance(problem, dict):
                problem = {"detail": str(problem)}
            raise ApiError(err.code, problem) from None

    def _json(self, method: str, path: str, body: Any = None, **kw) -> Any:
        status, headers, raw = self.request(method, path, body, **kw)
        return json.loads(raw) if raw else {}

    # -- evaluations --------------------------------------------------------------------------
    def evaluate(self, qrels: Any = None, run: Any = None,
                 measures: list[str] | None = None, *, qrels_id: str | None = None,
                 options: dict | None = None,
                 per_topic: bool | None = None, details: bool = False,
                 prefer_async: bool = False, accept: str = "application/json", wait: bool = True,
                 record: dict | None = None, progress: Progress | None = None,
                 timeout: float | None = None, topic_metadata_id: str | None = None) -> Any:
        """Evaluate ``run`` (a path, a mapping, TREC text or bytes, a table) against
        ``qrels`` (same forms) or stored ``qrels_id`` (``ID`` or ``ID@VERSION``), sending
        the run once. Returns the result document (``accept`` JSON), or for ``text/plain``
        / ``text/csv`` the text as a :class:`Text` (``.recorded``, ``.job``); with
        ``wait=False`` a queued job's status instead. ``record`` (``{"system", "label",
        "commit"?, "tags"?}``) keeps the result in the service's history (the document's
        ``recorded`` names it). A queued job is polled, ``progress(job)`` told each state,
        until it ends or ``timeout`` seconds (default: the client's) pass.

        A path or bytes goes as a multipart file part (a path streamed from disk), as does
        TREC text beside one; two mappings (or texts) as a JSON body; a pyarrow Table or
        pandas/polars DataFrame as an Arrow IPC stream part.

        The qrels come first, as :func:`cranfield.evaluate` and trec_eval take them:
        ``evaluate(qrels, run, measures)``, or ``evaluate(run=..., qrels_id=...)``. A run
        missing is a TypeError; inputs that look swapped (a run's text, a float mapping or a
        Run as qrels; qrels' text or a Qrels as the run) an InputError naming the order.

        ``options["topic_metadata"]`` (read here, by the engine's reader) or stored
        ``topic_metadata_id`` (``ID`` or ``ID@VERSION``, :meth:`put_topic_metadata`): the
        document gains ``segments`` and ``weighted``."""
        check_order("evaluate", qrels, run, qrels_id)
        # per_topic unsaid is the service's default for the answer's format: per-topic values
        # in JSON and CSV, the summary in text/plain (as cranfield eval without -q)
        fields: dict[str, Any] = {} if per_topic is None else {"per_topic": per_topic}
        if qrels_id is not None:
            fields["qrels_id"] = qrels_id
        if topic_metadata_id is not None:
            fields["topic_metadata_id"] = topic_metadata_id
        if measures is not None:
            fields["measures"] = list(measures)
        if options:
            fields["options"] = {k: v for k, v in options.items() if v is not None}
            if "topic_metadata" in fields["options"]:  # read here; as_json/as_text when sent
                fields["options"]["topic_metadata"] = _topic_metadata(
                    fields["options"]["topic_metadata"])
        if details:
            fields["details"] = True
        if record:
            fields["record"] = dict(record)
        inputs = [run] if qrels_id is not None else [run, qrels]
        carried = None if measures is None else form_measures(measures)
        body: Any = None
        # a name only a JSON body can carry (rare): then files are read and sent in it
        if (measures is None or carried is not None) and any(
                is_columns(v) or isinstance(v, bytes) or _path_of(v) is not None
                for v in inputs):
            if carried is not None:
                fields["measures"] = carried
            parts = [_part("run", run)] + ([] if qrels_id is not None
                                           else [_part("qrels", qrels)])
            body = MultipartBody(_form_fields(fields), parts)
        if body is None:
            if "topic_metadata" in fields.get("options", {}):
                fields["options"]["topic_metadata"] = fields["options"]["topic_metadata"].as_json()
            body = {"run": _text_or_mapping(run), **(
                {} if qrels_id is not None else {"qrels": _text_or_mapping(qrels)}), **fields}
        headers = {"Accept": accept}
        if prefer_async:
            headers["Prefer"] = "respond-async"
        status, resp_headers, raw = self.request("POST", "/v1/evaluations", body,
                                                 headers=headers)
        if status != 202:
            if accept == "application/json":
                return json.loads(raw)
            result_id = resp_headers.get("Cranfield-Result-Id")
            recorded = ({"id": result_id, "system": record["system"],
                         "label": record["label"]} if result_id and record else None)
            return Text.of(raw.decode("utf-8"), recorded)
        job = json.loads(raw)
        if not wait:
            return job
        state = self.wait(resp_headers.get("Location") or job["id"], timeout=timeout,
                          progress=progress)
        if accept == "application/json":
            return state["result"]
        return self.job_result(state["id"], accept, state)

    def job_result(self, job: str, accept: str = "application/json",
                   state: dict | None = None) -> Any:
        """A finished job's result in ``accept``: its document (JSON), or the server's
        rendering of it (``text/plain``: trec_eval's text, ``text/csv``) as a
        :class:`Text` carrying the document's ``recorded``. ``state``: the job as last
        polled, if at hand."""
        job_id = _job_id(job)
        if accept == "application/json":
            return (state or self.job(job_id))["result"]
        _, _, raw = self.request("GET", f"/v1/jobs/{job_id}", headers={"Accept": accept})
        recorded = ((state or {}).get("result") or {}).get("recorded")
        return Text.of(raw.decode("utf-8"), recorded, job_id)

    def job(self, job_id: str) -> dict:
        return self._json("GET", f"/v1/jobs/{_job_id(job_id)}")

    def cancel(self, job_id: str) -> dict:
        return self._json("DELETE", f"/v1/jobs/{_job_id(job_id)}")

    def wait(self, job: str, timeout: float | None = None, first_delay: float = 0.05,
             max_delay: float = 1.0, progress: Progress | None = None) -> dict:
        """Poll a job (id or Location) with exponential back-off until it ends, telling
        ``progress(state)`` each state; raises :class:`ApiError` with the job's problem if it
        failed or was canceled, ``TimeoutError`` after ``timeout`` seconds."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        delay = first_delay
        while True:
            state = self.job(job)
            if progress is not None:
                progress(state)
            if state["status"] == "finished":
                return state
            if state["status"] in ("failed", "canceled"):
                problem = state.get("problem") or {"title": f"job {state['status']}",
                                                   "detail": f"job {state['id']} "
                                                             f"{state['status']}"}
                raise ApiError(problem.get("status", 409), problem)
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {state['id']} still {state['status']}")
            time.sleep(delay)
            delay = min(delay * 2, max_delay)

    # -- comparisons and gates ----------------------------------------------------------------
    def compare(self, qrels: Any = None, runs: list[dict] | None = None, *,
                qrels_id: str | None = None,
                measures: list[str] | None = None, baseline: str | dict | None = None,
                gate: Any = None, accept: str = "application/json",
                prefer_async: bool = False, progress: Progress | None = None,
                timeout: float | None = None, **settings: Any) -> Any:
        """``POST /v1/comparisons``: ``runs`` as the API takes them (``{"result_id"}``,
        ``{"evaluation_id"}``, ``{"run", "name"?}``), ``baseline`` a run's name or
        ``{"system": NAME}`` (the system's pinned baseline joins the runs), ``gate`` the
        CLI's ``MEASURE:MAX_DROP[%][@ALPHA]`` texts or objects; ``settings`` the request's
        other members (tests, correction, alpha, permutations...). Returns the comparison
        document (or the text/page ``accept`` asks for); a queued comparison is waited for.
        The qrels (or ``qrels_id``) come first, then the runs: ``compare(qrels, runs)``,
        ``compare(runs=..., qrels_id=...)``; a list given alone is the runs (recorded results
        need no qrels)."""
        if runs is None and isinstance(qrels, list | tuple):
            # a list alone is the runs, never qrels (recorded results need no qrels)
            qrels, runs = None, qrels
        check_order("compare", qrels, runs, qrels_id)
        body: dict[str, Any] = {"runs": [dict(r, run=_text_or_mapping(r["run"]))
                                         if "run" in r else dict(r) for r in runs]}
        if qrels is not None:
            body["qrels"] = _text_or_mapping(qrels)
        for key, value in (("qrels_id", qrels_id), ("measures", measures),
                           ("baseline", baseline), ("gate", gate)):
            if value is not None:
                body[key] = list(value) if key == "measures" else value
        body.update({k: v for k, v in settings.items() if v is not None})
        if (body.get("options") or {}).get("topic_metadata") is not None:
            body["options"] = dict(body["options"], topic_metadata=_topic_metadata(
                body["options"]["topic_metadata"]).as_json())
        headers = {"Accept": accept, **({"Prefer": "respond-async"} if prefer_async else {})}
        status, resp_headers, raw = self.request("POST", "/v1/comparisons", body,
                                                 headers=headers)
        if status == 202:
            state = self.wait(resp_headers.get("Location") or json.loads(raw)["id"],
                              timeout=timeout, progress=progress)
            return self.job_result(state["id"], accept, state)
        return json.loads(raw) if accept == "application/json" else raw.decode("utf-8")

    def gate(self, system: str, result_id: str, measures: list[str] | None, gate: Any, *,
             name: str | None = None, progress: Progress | None = None, **settings: Any
             ) -> dict:
        """Gate recorded result ``result_id`` against ``system``'s pinned baseline (``POST
        /v1/comparisons`` with ``runs: [{result_id}]``, ``baseline: {system}``): the
        comparison document, its ``gate`` the verdict (kept with the result on the
        service). ``name``: the candidate's name in the document (default: its
        ``system@label``). An ApiError of kind ``no-baseline`` when none is pinned."""
        run = {"result_id": result_id, **({"name": name} if name else {})}
        return self.compare(runs=[run], measures=measures, baseline={"system": system}, gate=gate,
                            progress=progress, **settings)

    # -- stored qrels -------------------------------------------------------------------------
    def put_qrels(self, qrels_id: str, qrels: Any, *, diversity: bool = False,
                  if_match: str | None = None, qrels_format: str = "qrels") -> dict:
        """Store ``qrels`` (a path, streamed as TREC text; text; or a mapping) as
        ``qrels_id``: their metadata (``id``, ``version``, ``judgments``...). The same
        judgments again are the same version (unchanged); ``if_match`` a version the
        latest must still be (else ApiError 412). ``qrels_format`` (trec_eval's -R:
        ``qrels_jg``, ``prefs``, ``qrels_prefs``): judgments of that kind, stored as it (an
        evaluation with this id reads them so)."""
        headers = {"If-Match": f'"{if_match}"'} if if_match else {}
        path = _path_of(qrels)
        if path is not None:
            params = (["diversity=true"] if diversity else []) + \
                ([f"qrels_format={qrels_format}"] if qrels_format != "qrels" else [])
            query = "?" + "&".join(params) if params else ""
            return self._json("PUT", f"/v1/qrels/{_quoted(qrels_id)}{query}",
                              Part("qrels", os.path.basename(path), TEXT_PART, path=path),
                              headers=headers, content_type="text/plain")
        body = {"qrels": _text_or_mapping(qrels), "diversity": diversity}
        if qrels_format != "qrels":
            body["qrels_format"] = qrels_format
        return self._json("PUT", f"/v1/qrels/{_quoted(qrels_id)}", body, headers=headers)

    def qrels(self, qrels_id: str) -> dict:
        return self._json("GET", f"/v1/qrels/{_quoted(qrels_id).replace('%40', '@')}")

    def list_qrels(self, offset: int = 0, limit: int = 50) -> dict:
        """One page of the stored qrels (``items``, ``total``, ``next``)."""
        return self._json("GET", f"/v1/qrels?offset={offset}&limit={limit}")

    def all_qrels(self) -> list[dict]:
        """Every stored qrels' latest version (page after page)."""
        return self._every_page("/v1/qrels?limit=1000")

    def delete_qrels(self, qrels_id: str) -> None:
        self.request("DELETE", f"/v1/qrels/{_quoted(qrels_id)}")

    # -- stored topic metadata (segments and weights) ----------------------------------------
    def put_topic_metadata(self, metadata_id: str, metadata: Any, *,
                           if_match: str | None = None) -> dict:
        """Store topic metadata (a path, text, bytes, the mapping or a
        :class:`~cranfield.segments.TopicMetadata`; read here first, by the engine's reader,
        whose errors name the line) as ``metadata_id``: its version's description
        (``version``, ``sha256``, ``segments``...). The same metadata in any form is the same
        version; ``if_match`` a version the latest must still be (else ApiError 412)."""
        headers = {"If-Match": f'"{if_match}"'} if if_match else {}
        body = {"topic_metadata": _topic_metadata(metadata).as_json()}
        return self._json("PUT", f"/v1/topic-metadata/{_quoted(metadata_id)}", body,
                          headers=headers)

    def topic_metadata(self, metadata_id: str, *, content: bool = False) -> dict:
        """A stored version's description (``ID`` or ``ID@VERSION``); ``content``: with the
        mapping itself (``topic_metadata``)."""
        query = "?content=true" if content else ""
        return self._json("GET", f"/v1/topic-metadata/"
                                 f"{_quoted(metadata_id).replace('%40', '@')}{query}")

    def list_topic_metadata(self, offset: int = 0, limit: int = 50) -> dict:
        """One page of the stored topic metadata (``items``, ``total``, ``next``)."""
        return self._json("GET", f"/v1/topic-metadata?offset={offset}&limit={limit}")

    def delete_topic_metadata(self, metadata_id: str) -> None:
        self.request("DELETE", f"/v1/topic-metadata/{_quoted(metadata_id)}")

    def measures(self) -> dict:
        return self._json("GET", "/v1/measures")

    # -- recorded results -------------------------------------------------------------------
    def systems(self) -> list[dict]:
        """Every system with recorded results (``GET /v1/systems``, page after page)."""
        return self._every_page("/v1/systems?limit=1000")

    def _every_page(self, path: str | None) -> list[dict]:
        """The items of a paged listing, following each page's ``next`` link."""
        out = []
        while path:
            page = self._json("GET", path)
            out += page["items"]
            path = page.get("next")
        return out

    def result(self, result_id: str) -> dict:
        """A recorded result: its summary and its whole document."""
        return self._json("GET", f"/v1/results/{_quoted(result_id)}")

    def results(self, system: str, *, offset: int = 0, limit: int = 50,
                **filters: str | None) -> dict:
        """One page of a system's recorded results, newest first (``since``, ``until``,
        ``tag``, ``qrels_version`` filter them)."""
        query = urllib.parse.urlencode({"offset": offset, "limit": limit,
                                        **{k: v for k, v in filters.items() if v}})
        return self._json("GET", f"/v1/systems/{_quoted(system)}/results?{query}")

    history = results

    def pin_baseline(self, system: str, result_id: str | None = None,
                     latest: bool = False) -> dict:
        """Pin ``result_id`` (or with ``latest`` the system's newest result) as ``system``'s
        accepted baseline: the pinned result's summary."""
        if (result_id is None) == (not latest):
            raise ValueError("give result_id or latest=True (one of them)")
        if latest:
            items = self.results(system, limit=1)["items"]
            if not items:
                raise ApiError(404, {"title": "Not Found", "status": 404,
                                     "type": "https://cranfield.dev/problems/not-found",
                                     "detail": f"system {system!r} has no results"})
            result_id = items[0]["id"]
        return self._json("PUT", f"/v1/systems/{_quoted(system)}/baseline",
                          {"result_id": result_id})

    def baseline(self, system: str) -> dict:
        """``system``'s pinned baseline (its summary); ApiError 404 when none is pinned."""
        return self._json("GET", f"/v1/systems/{_quoted(system)}/baseline")

    def trend(self, system: str, measure: str, *, since: str | None = None,
              until: str | None = None, limit: int | None = None,
              accept: str = "application/json", segment: str | None = None,
              weighted: bool = False) -> Any:
        """A measure's mean and 95% CI for each recorded result of ``system``, oldest first,
        with its latest gate verdict (``GET /v1/systems/{name}/trend``): the newest ``limit``
        recorded in the ``since``/``until`` window (ISO 8601). ``accept="text/html"``: the
        trend page's HTML instead of the document. ``segment``: the measure's recorded
        aggregate over that segment of the results' topic metadata; ``weighted``: their
        weighted means."""
        query = urllib.parse.urlencode({"measure": measure, **{
            k: v for k, v in (("since", since), ("until", until), ("limit", limit),
                              ("segment", segment),
                              ("weighted", "true" if weighted else None))
            if v is not None}})
        path = f"/v1/systems/{_quoted(system)}/trend?{query}"
        if accept == "application/json":
            return self._json("GET", path)
        return self.request("GET", path, headers={"Accept": accept})[2].decode("utf-8")
