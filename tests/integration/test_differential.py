"""One input, one answer: generated inputs sent through every way in must give identical
aggregates and per-topic values, or a refusal on every path (a 4xx naming a field or line,
a CLI exit code != 0 with a one-line message, an ``InputError``/``EvaluationError``).

Ways in, for TREC text: the CLI on files (columnar reader forced), the library on text (line
reader), the API with TREC text in JSON, multipart files (werkzeug's parser and the service's
own, each forced), stored qrels (PUT text/plain, then
``qrels_id``) and a queued job on a real worker (fast readers forced there). For mappings:
the library, the API's JSON with orjson and with the compiled scan (forced by
``FAST_JSON_MIN_BYTES``), stored qrels (PUT JSON) and a queued job. When an input means the
same in both forms (valid ids that text can carry, spellings valid or invalid in both), the
two forms must agree with each other too.

Generated: ties, unicode and NBSP ids, long ids, ids with spaces/tabs/newlines/control
characters, grades across the int64 edge, number spellings (``1_5``, ``1e400``, ``"3.0"``,
fullwidth and Arabic-Indic digits, ``0x10``, ``inf``), CRLF, tabs, comments, empty and
comment-only files, docids twice in a topic.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from servers import CRANFIELD, ROOT, stop

import cranfield
import cranfield.inputs.io
import service.evaluation_request
from cranfield import cli
from cranfield.inputs import json_body
from service.app import create_app

MEASURES = ["map", "P.5", "ndcg_cut.10", "recip_rank", "num_ret", "num_rel", "num_rel_ret",
            "bpref", "Rprec"]
EXAMPLES = int(os.environ.get("CRANFIELD_DIFFERENTIAL_EXAMPLES", 300))

# ---------------------------------------------------------------------------------------------
# Generated inputs: (topic, docid, spelling) rows; each spelling knows its JSON rendering and
# whether text and JSON agree on it.
# ---------------------------------------------------------------------------------------------

GOOD_IDS = ["q1", "q2", "01", "1", "é", "日本", "d\u00a0x", "a#b", "x" * 300, "Q0", "-"]
BAD_IDS = ["a b", "a\tb", "a\nb", "x\x01y", "x\x7fy", "a\u00a0 b"]
# (text spelling, JSON literal (None: the spelling sent as a JSON string), valid as text,
# valid as JSON)
SCORES = [("1", "1", True, True), ("2.5", "2.5", True, True), ("-0.5", "-0.5", True, True),
          (".5", "0.5", True, True), ("5.", "5.0", True, True), ("1e-3", "1e-3", True, True),
          ("+1E+02", "1E+02", True, True), ("0", "0", True, True),
          ("1.0000001", "1.0000001", True, True), ("1e-400", "1e-400", True, True),
          ("3.0", None, True, False), ("1_5", None, False, False),
          ("1e400", "1e400", False, False), ("inf", None, False, False),
          ("nan", None, False, False), ("\uff13", None, False, False),
          ("\u0663", None, False, False), ("0x10", None, False, False)]
GRADES = [("0", "0", True, True), ("1", "1", True, True), ("2", "2", True, True),
          ("-1", "-1", True, True), ("3", "3", True, True),
          ("9223372036854775807", "9223372036854775807", True, True),
          ("-9223372036854775808", "-9223372036854775808", True, True),
          ("9223372036854775808", "9223372036854775808", False, False),
          ("1e19", "1e19", False, False), ("1_0", None, False, False),
          ("1.5", "1.5", False, False), ("\uff11", None, False, False),
          ("0x10", None, False, False), ("2.0", "2.0", False, True), ("1", '"1"', True, False)]

good_ids = st.one_of(st.sampled_from(GOOD_IDS), st.text(st.characters(
    min_codepoint=33, max_codepoint=0x2FFF, blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")),
    min_size=1, max_size=5).filter(lambda x: not x.startswith("#")))
good_score = st.sampled_from([s for s in SCORES if s[2] and s[3]])
good_grade = st.sampled_from([g for g in GRADES if g[2] and g[3]])
bad_score = st.sampled_from([s for s in SCORES if not (s[2] and s[3])])
bad_grade = st.sampled_from([g for g in GRADES if not (g[2] and g[3])])
MUTATIONS = ["none"] * 8 + ["bad id", "bad score", "bad grade", "duplicate", "empty",
                             "comments", "hash topic"]


@st.composite
def inputs(draw):
    """A valid case (ties: few score spellings; graded, negative and int64-edge grades),
    with at most one hostile change, so that about half the cases evaluate."""
    topics = draw(st.lists(st.sampled_from(["q1", "q2", "01", "é", "t\u00a0x"]) | good_ids,
                           min_size=1, max_size=3, unique=True))
    run_rows, qrels_rows = [], []
    for t in topics:
        docs = draw(st.lists(good_ids, min_size=1, max_size=8, unique=True))
        run_rows += [(t, d, draw(good_score)) for d in docs]
        judged = draw(st.lists(st.sampled_from(docs) | good_ids, max_size=6, unique=True))
        qrels_rows += [(t, d, draw(st.sampled_from(GRADES[:5]) | good_grade))
                       for d in judged]
    mutation = draw(st.sampled_from(MUTATIONS))
    if mutation == "bad id":
        rows = draw(st.sampled_from([run_rows, qrels_rows] if qrels_rows else [run_rows]))
        k = draw(st.integers(0, len(rows) - 1))
        t, d, sp = rows[k]
        bad = draw(st.sampled_from(BAD_IDS))
        rows[k] = (bad, d, sp) if draw(st.booleans()) else (t, bad, sp)
    elif mutation == "bad score":
        k = draw(st.integers(0, len(run_rows) - 1))
        run_rows[k] = run_rows[k][:2] + (draw(bad_score),)
    elif mutation == "bad grade" and qrels_rows:
        k = draw(st.integers(0, len(qrels_rows) - 1))
        qrels_rows[k] = qrels_rows[k][:2] + (draw(bad_grade),)
    elif mutation == "duplicate":  # a docid twice in a topic (text only)
        run_rows.append(run_rows[draw(st.integers(0, len(run_rows) - 1))])
    elif mutation == "hash topic":  # a comment line to text, a topic to JSON
        run_rows.append(("#c", "d1", SCORES[0]))
    layout = {"sep": draw(st.sampled_from([" ", "\t", "  ", " \t"])),
              "crlf": draw(st.integers(0, 4)) == 0, "comment": draw(st.booleans()),
              "empty": mutation if mutation in ("empty", "comments") else None}
    event(f"mutation: {mutation}")
    return run_rows, qrels_rows, layout


def trec_text(rows, kind: str, layout) -> bytes:
    sep, eol = layout["sep"], "\r\n" if layout["crlf"] else "\n"
    if layout["empty"] == "empty" and kind == "qrels":
        return b""
    lines = ["# a comment" + eol] if layout["comment"] or layout["empty"] == "comments" else []
    if not (layout["empty"] == "comments" and kind == "qrels"):
        for rank, (t, d, (spelling, *_)) in enumerate(rows, start=1):
            fields = [t, "Q0", d, str(rank), spelling, "sys"] if kind == "run" else \
                [t, "0", d, spelling]
            lines.append(sep.join(fields) + eol)
    return "".join(lines).encode("utf-8")


def json_mapping_text(rows, kind: str, layout) -> bytes | None:
    """The mapping as JSON text with each number spelled as generated (None: rows with a
    docid twice, which a JSON object cannot say)."""
    if kind == "qrels" and layout["empty"]:
        return b"{}"
    by_topic: dict[str, list[str]] = {}
    seen = set()
    for t, d, (spelling, literal, *_) in rows:
        if (t, d) in seen:
            return None
        seen.add((t, d))
        value = literal if literal is not None else json.dumps(spelling)
        by_topic.setdefault(t, []).append(f"{json.dumps(d, ensure_ascii=False)}: {value}")
    return ("{" + ", ".join(f"{json.dumps(t, ensure_ascii=False)}: {{{', '.join(docs)}}}"
                            for t, docs in by_topic.items()) + "}").encode("utf-8")


def cross_form(run_rows, qrels_rows, layout) -> bool:
    """Whether text and mapping say the same: ids text can carry, no '#'-first topic (a
    comment line to text), no duplicate, every spelling valid or invalid in both."""
    rows = run_rows + qrels_rows
    ids_ok = all(cranfield.inputs.grammar.id_problem(x) is None and not t.startswith("#")
                 for t, d, _ in rows for x in (t, d))
    unique = len({(t, d) for t, d, _ in run_rows}) == len(run_rows)
    spelled_alike = all(sp[2] == sp[3] for _, _, sp in rows)
    return ids_ok and unique and spelled_alike and not layout["empty"]


# ---------------------------------------------------------------------------------------------
# Outcomes: ("ok", aggregate, per_topic) or ("refused", where)
# ---------------------------------------------------------------------------------------------

def _clean(doc: dict) -> dict:
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in doc.items()}


def ok(aggregate: dict, per_topic: dict) -> tuple:
    return ("ok", _clean(aggregate), {t: _clean(r) for t, r in per_topic.items()})


def by_library(run, qrels) -> tuple:
    try:
        ev = cranfield.evaluate(qrels, run, MEASURES)
    except (cranfield.InputError, cranfield.EvaluationError) as exc:
        return ("refused", str(exc))
    return ok(ev.aggregate, ev.per_topic)


def by_cli(run: bytes, qrels: bytes, tmp: Path) -> tuple:
    (tmp / "run").write_bytes(run)
    (tmp / "qrels").write_bytes(qrels)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(["eval", "-q", "--format", "json", *sum((["-m", m] for m in
                                                                      MEASURES), []),
                             str(tmp / "qrels"), str(tmp / "run")])
        except SystemExit as exc:
            code = exc.code
    if code != 0:
        message = err.getvalue()
        assert "Traceback" not in message and message.startswith("cranfield: "), message
        return ("refused", message.strip())
    doc = json.loads(out.getvalue())
    return ok(doc["aggregate"], doc.get("per_topic", {}))


def refused_or_ok(resp, where: str) -> tuple:
    assert resp.status_code < 500, (where, resp.status_code, resp.get_data(as_text=True))
    body = resp.get_json()
    if resp.status_code >= 400:
        assert resp.mimetype == "application/problem+json", where
        assert body.get("errors") or body.get("detail"), body
        return ("refused", body.get("errors"))
    return ok(body["aggregate"], body["per_topic"])


def post_json(client, body: bytes, headers=None):
    return client.post("/v1/evaluations", data=body, content_type="application/json",
                       headers=headers or {})


def body_of(run_json: bytes, qrels_json: bytes | None, qrels_id: str | None = None) -> bytes:
    qrels_part = b'"qrels": ' + qrels_json if qrels_json is not None else \
        b'"qrels_id": ' + orjson.dumps(qrels_id)
    return b'{"run": ' + run_json + b", " + qrels_part + b', "measures": ' + \
        orjson.dumps(MEASURES) + b"}"


def by_stored(client, qrels_payload: bytes, content_type: str, run_json: bytes) -> tuple:
    qrels_id = f"d-{uuid.uuid4().hex[:12]}"
    put = client.put(f"/v1/qrels/{qrels_id}", data=qrels_payload, content_type=content_type)
    assert put.status_code < 500, put.get_data(as_text=True)
    if put.status_code >= 400:
        return refused_or_ok(put, "PUT qrels")
    return refused_or_ok(post_json(client, body_of(run_json, None, qrels_id)), "stored")


def by_queue(client, body: bytes) -> tuple:
    resp = post_json(client, body, {"Prefer": "respond-async"})
    if resp.status_code != 202:
        return refused_or_ok(resp, "queue submit")
    location = resp.headers["Location"]
    deadline = time.monotonic() + 60
    while True:
        job = client.get(location).get_json()
        if job["status"] in ("finished", "failed"):
            break
        assert time.monotonic() < deadline, job
        time.sleep(0.01)
    if job["status"] == "failed":
        problem = job["problem"]
        assert 400 <= problem["status"] < 500 and problem.get("errors"), problem
        return ("refused", problem["errors"])
    return ok(job["result"]["aggregate"], job["result"]["per_topic"])


def same(outcomes: dict) -> None:
    """Every outcome the same: equal numbers, or all refused (each names its place)."""
    kinds = {name: o[0] for name, o in outcomes.items()}
    assert len(set(kinds.values())) == 1, outcomes
    if next(iter(kinds.values())) == "ok":
        first_name, first = next(iter(outcomes.items()))
        for name, o in outcomes.items():
            assert o[1] == first[1], (name, first_name, o[1], first[1])
            assert o[2] == first[2], (name, first_name)


# ---------------------------------------------------------------------------------------------
# The harness: a real Redis, a real worker (fast readers forced), the app on that Redis
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def client(redis_server, tmp_path_factory):
    # results in a SQLite file of this module's own, never the repository's instance/
    database = f"sqlite:///{tmp_path_factory.mktemp('results') / 'results.db'}"
    env = dict(os.environ, CRANFIELD_FAST_READER_MIN_BYTES="0",
               CRANFIELD_FAST_JSON_MIN_BYTES="0", CRANFIELD_DATABASE_URL=database)
    worker = subprocess.Popen([CRANFIELD, "worker", "--redis-url", redis_server.url],
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    app = create_app({"TESTING": True, "REDIS_URL": redis_server.url, "DATABASE_URL": database,
                      "ASYNC_THRESHOLD_BYTES": 1 << 30})
    yield app.test_client()
    stop(worker)


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory(prefix="cranfield-diff-") as tmp:
        yield Path(tmp)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=os.environ.get("CI") == "true",
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(case=inputs())
def test_every_way_in_gives_one_answer(case, client, workdir, monkeypatch):
    run_rows, qrels_rows, layout = case
    run_text, qrels_text = trec_text(run_rows, "run", layout), trec_text(qrels_rows, "qrels",
                                                                       layout)
    text_outcomes = {}
    with monkeypatch.context() as m:
        m.setattr(cranfield.inputs.io, "FAST_READER_MIN_BYTES", 0)
        text_outcomes["cli (columnar reader)"] = by_cli(run_text, qrels_text, workdir)
    text_outcomes["library text (line reader)"] = by_library(run_text, qrels_text)
    text_body = body_of(orjson.dumps(run_text.decode()), orjson.dumps(qrels_text.decode()))
    text_outcomes["api trec text in json"] = refused_or_ok(post_json(client, text_body),
                                                           "text in json")
    for cut, min_bytes in (("werkzeug", 1 << 40), ("service.multipart", 0)):
        with monkeypatch.context() as m:  # both multipart parsers, forced by their threshold
            m.setattr(service.evaluation_request, "FAST_MULTIPART_MIN_BYTES", min_bytes)
            multipart = client.post("/v1/evaluations", content_type="multipart/form-data",
                                    data={"run": (io.BytesIO(run_text), "run.txt"),
                                          "qrels": (io.BytesIO(qrels_text), "q.txt"),
                                          "measures": ",".join(MEASURES)})
        text_outcomes[f"api multipart ({cut})"] = refused_or_ok(multipart, f"multipart {cut}")
    text_outcomes["api stored qrels (text)"] = by_stored(
        client, qrels_text, "text/plain", orjson.dumps(run_text.decode()))
    text_outcomes["queued job (text)"] = by_queue(client, text_body)
    same(text_outcomes)
    event(f"text: {next(iter(text_outcomes.values()))[0]}")

    run_json = json_mapping_text(run_rows, "run", layout)
    qrels_json = json_mapping_text(qrels_rows, "qrels", layout)
    if run_json is None:
        return
    map_outcomes = {}
    try:
        run_map, qrels_map = json.loads(run_json), json.loads(qrels_json)
    except ValueError:  # 1e400 as a JSON literal: Python reads inf; orjson refuses the body
        run_map = qrels_map = None
    if run_map is not None:
        map_outcomes["library mapping"] = by_library(run_map, qrels_map) if run_map else \
            ("refused", "empty")
    body = body_of(run_json, qrels_json)
    with monkeypatch.context() as m:
        m.setattr(json_body, "FAST_JSON_MIN_BYTES", 1 << 40)
        map_outcomes["api json (orjson)"] = refused_or_ok(post_json(client, body), "orjson")
    with monkeypatch.context() as m:
        m.setattr(json_body, "FAST_JSON_MIN_BYTES", 0)
        map_outcomes["api json (compiled scan)"] = refused_or_ok(post_json(client, body),
                                                                 "scan")
    map_outcomes["api stored qrels (json)"] = by_stored(
        client, b'{"qrels": ' + qrels_json + b"}", "application/json", run_json)
    map_outcomes["queued job (json)"] = by_queue(client, body)
    same(map_outcomes)
    event(f"mapping: {next(iter(map_outcomes.values()))[0]}")

    if cross_form(run_rows, qrels_rows, layout):
        same({"text": text_outcomes["library text (line reader)"],
              "mapping": map_outcomes["api json (orjson)"]})
