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

The bodies it sends are built by :mod:`cranfield.client_body`. Room: top.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from .client_body import (
    TEXT_PART,
    MultipartBody,
    Part,
    file_part,
    form_fields,
    form_measures,
    path_of,
    text_or_mapping,
    topic_metadata_option,
)
from .client_history import HistoryCalls  # stability, re-scoring (issue #31)
from .inputs.io import is_columns  # (columns, told from paths and text without importing pyarrow)
from .inputs.swapped import check_order

#: the media types ``evaluate``'s ``accept`` takes
TEXT_FORMATS = ("text/plain", "text/csv")


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


def _quoted(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _job_id(job: str) -> str:
    """A job's id from its id or its Location (``/v1/jobs/ID``)."""
    return job.rstrip("/").rsplit("/", 1)[-1]


Progress = Callable[[dict], None]


class Client(HistoryCalls):
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
                fields["options"]["topic_metadata"] = topic_metadata_option(
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
                is_columns(v) or isinstance(v, bytes) or path_of(v) is not None
                for v in inputs):
            if carried is not None:
                fields["measures"] = carried
            parts = [file_part("run", run)] + ([] if qrels_id is not None
                                               else [file_part("qrels", qrels)])
            body = MultipartBody(form_fields(fields), parts)
        if body is None:
            if "topic_metadata" in fields.get("options", {}):
                fields["options"]["topic_metadata"] = fields["options"]["topic_metadata"].as_json()
            body = {"run": text_or_mapping(run), **(
                {} if qrels_id is not None else {"qrels": text_or_mapping(qrels)}), **fields}
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

    def evaluate_many(self, qrels: Any = None, runs: Any = None,
                      measures: list[str] | None = None, *, qrels_id: str | None = None,
                      options: dict | None = None, per_topic: bool | None = None,
                      curves: bool = False, accept: str = "application/json",
                      topic_metadata_id: str | None = None, prefer_async: bool = False,
                      wait: bool = True, progress: Progress | None = None,
                      timeout: float | None = None) -> Any:
        """``POST /v1/evaluations/batch``: every run of ``runs`` against ``qrels`` (or stored
        ``qrels_id``), the qrels read once by the service, as
        :func:`cranfield.evaluate_many` evaluates them here. ``runs``: a mapping ``{name:
        run}``, or a sequence of runs named as :func:`cranfield.evaluate_many` names them (a
        path by its file's stem, made unique; any other run ``run1``, ``run2``... by its
        place); each a path (read and sent as its text), a mapping, TREC text or bytes.
        Returns ``{name: document}``, each document what :meth:`evaluate` returns for that
        run alone, or for ``accept="text/plain"`` the text (per run, what ``cranfield eval``
        prints, after trec_eval's ``runid`` line when there are several). A batch the
        service queues (a body over its ASYNC_THRESHOLD_BYTES, or ``prefer_async``) is
        polled as :meth:`evaluate` polls a job, ``progress(job)`` told each state, until it
        ends or ``timeout`` seconds (default: the client's) pass; its result is returned as
        above (with ``wait=False``, the queued job's status instead)."""
        from collections.abc import Mapping

        from .inputs.run_naming import run_names

        if runs is None or isinstance(runs, str | bytes):
            raise TypeError("evaluate_many: runs must be a mapping {name: run} or a sequence "
                            "of runs")
        if isinstance(runs, Mapping):
            names, sources = list(runs), list(runs.values())
        else:
            sources = list(runs)
            names = run_names([path_of(run) for run in sources])
        body: dict[str, Any] = {"runs": [{"name": name, "run": text_or_mapping(run)}
                                         for name, run in zip(names, sources, strict=True)]}
        if qrels_id is not None:
            body["qrels_id"] = qrels_id
        else:
            body["qrels"] = text_or_mapping(qrels)
        if topic_metadata_id is not None:
            body["topic_metadata_id"] = topic_metadata_id
        if measures is not None:
            body["measures"] = list(measures)
        if options:
            body["options"] = {k: v for k, v in options.items() if v is not None}
            if "topic_metadata" in body["options"]:
                body["options"]["topic_metadata"] = topic_metadata_option(
                    body["options"]["topic_metadata"]).as_json()
        if per_topic is not None:
            body["per_topic"] = per_topic
        if curves:
            body["curves"] = True
        headers = {"Accept": accept, **({"Prefer": "respond-async"} if prefer_async else {})}
        status, resp_headers, raw = self.request("POST", "/v1/evaluations/batch", body,
                                                 headers=headers)
        if status == 202:
            job = json.loads(raw)
            if not wait:
                return job
            state = self.wait(resp_headers.get("Location") or job["id"], timeout=timeout,
                              progress=progress)
            if accept != "application/json":
                return self.job_result(state["id"], accept, state)  # a Text: .job
            result = state["result"]
        elif accept != "application/json":
            return raw.decode("utf-8")
        else:
            result = json.loads(raw)
        return {doc.pop("name"): doc for doc in result["evaluations"]}

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
        body: dict[str, Any] = {"runs": [dict(r, run=text_or_mapping(r["run"]))
                                         if "run" in r else dict(r) for r in runs]}
        if qrels is not None:
            body["qrels"] = text_or_mapping(qrels)
        for key, value in (("qrels_id", qrels_id), ("measures", measures),
                           ("baseline", baseline), ("gate", gate)):
            if value is not None:
                body[key] = list(value) if key == "measures" else value
        body.update({k: v for k, v in settings.items() if v is not None})
        if (body.get("options") or {}).get("topic_metadata") is not None:
            body["options"] = dict(body["options"], topic_metadata=topic_metadata_option(
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
                  if_match: str | None = None, qrels_format: str = "qrels",
                  gains: str = "integer", judges: dict | None = None,
                  pool_depth: int | None = None) -> dict:
        """Store ``qrels`` (a path, streamed as TREC text; text; or a mapping) as
        ``qrels_id``: their metadata (``id``, ``version``, ``judgments``...). The same
        judgments again are the same version (unchanged); ``if_match`` a version the
        latest must still be (else ApiError 412). ``qrels_format`` (trec_eval's -R:
        ``qrels_jg``, ``prefs``, ``qrels_prefs``): judgments of that kind, stored as it (an
        evaluation with this id reads them so). ``gains="real"``: real-valued gains (issue
        #31), kept in the version's metadata (evaluations with this id read them so).
        ``judges`` (qrels_jg): each judge's provenance ``{name: {kind, model, ...}}``, kept
        in its metadata (a path then goes as a multipart part: text, Arrow or Parquet).
        ``pool_depth``: the depth of the pool the judgments cover, kept in its metadata."""
        headers = {"If-Match": f'"{if_match}"'} if if_match else {}
        path = path_of(qrels)
        extra = {k: v for k, v in (("judges", judges), ("pool_depth", pool_depth),
                                   ("gains", None if gains == "integer" else gains),
                                   ("diversity", diversity or None)) if v is not None}
        if path is not None and ("judges" in extra or pool_depth is not None):
            body = MultipartBody([("qrels_format", qrels_format)] + [(k, v if isinstance(
                v, str) else json.dumps(v)) for k, v in extra.items()], [Part(
                    "qrels", os.path.basename(path), "application/octet-stream", path=path)])
            return self._json("PUT", f"/v1/qrels/{_quoted(qrels_id)}", body, headers=headers)
        if path is not None:
            params = (["diversity=true"] if diversity else []) + \
                ([f"qrels_format={qrels_format}"] if qrels_format != "qrels" else []) + \
                ([f"gains={gains}"] if gains != "integer" else [])
            query = "?" + "&".join(params) if params else ""
            return self._json("PUT", f"/v1/qrels/{_quoted(qrels_id)}{query}",
                              Part("qrels", os.path.basename(path), TEXT_PART, path=path),
                              headers=headers, content_type="text/plain")
        body = {"qrels": text_or_mapping(qrels), "diversity": diversity, **extra}
        if qrels_format != "qrels":
            body["qrels_format"] = qrels_format
        return self._json("PUT", f"/v1/qrels/{_quoted(qrels_id)}", body, headers=headers)

    def agreement(self, qrels_id: str, *, resamples: int | None = None, seed: int | None = None,
                  level: float | None = None, per_topic: bool = True,
                  accept: str = "application/json") -> Any:
        """``GET /v1/qrels/{id}/agreement`` (issue #31): how much the judges of stored judged
        qrels (``id[@version]``) agree, with bootstrap intervals over topics; the document,
        or for ``accept="text/plain"`` its text (what ``cranfield qrels agreement`` prints)."""
        query = {k: v for k, v in (("resamples", resamples), ("seed", seed), ("level", level),
                                   ("per_topic", None if per_topic else "false")) if v is not None}
        path = f"/v1/qrels/{_quoted(qrels_id).replace('%40', '@')}/agreement?"
        _, _, raw = self.request("GET", path + urllib.parse.urlencode(query),
                                 headers={"Accept": accept})
        return json.loads(raw) if accept == "application/json" else raw.decode("utf-8")

    def consensus(self, qrels_id: str, method: str, *, judge: str | None = None,
                  judges: list[str] | None = None, target: str | None = None,
                  if_match: str | None = None) -> dict:
        """``POST /v1/qrels/{id}/consensus`` (issue #31): the judges' consensus (``method``
        majority, mean, max, or judge with ``judge``; ``judges`` those consulted) stored as a
        new version of ``id`` (or ``target``): its metadata, the recipe as ``consensus``."""
        body = {k: v for k, v in (("method", method), ("judge", judge), ("judges", judges),
                                  ("target", target)) if v is not None}
        headers = {"If-Match": f'"{if_match}"'} if if_match else {}
        return self._json("POST", f"/v1/qrels/{_quoted(qrels_id).replace('%40', '@')}"
                          "/consensus", body, headers=headers)

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
        :class:`~cranfield.inputs.segments.TopicMetadata`; read here first, by the engine's reader,
        whose errors name the line) as ``metadata_id``: its version's description
        (``version``, ``sha256``, ``segments``...). The same metadata in any form is the same
        version; ``if_match`` a version the latest must still be (else ApiError 412)."""
        headers = {"If-Match": f'"{if_match}"'} if if_match else {}
        body = {"topic_metadata": topic_metadata_option(metadata).as_json()}
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
