"""The argument order (issue #26): the qrels first, then the run(s), as trec_eval, ranx,
pytrec_eval and ir_measures take them, in cranfield.evaluate, cranfield.compare.compare, the
Web track's ndeval/gdeval and the client's evaluate/compare. A call written for the old order
(run first) is refused with a sentence naming the fix (cranfield.inputs.swapped), never evaluated
the wrong way round; a bad input that is not a swap keeps the reader's own error."""

from __future__ import annotations

import doctest
import io
import json

import pytest

import cranfield
from cranfield.client import Client
from cranfield.compare.comparison import compare
from cranfield.errors import InputError, error_report
from cranfield.measures.webtrack import gdeval, ndeval

# d1 and d3 relevant, ranked 1st and 3rd: AP = (1/1 + 2/3) / 2 = 5/6, P@1 = 1. Given the
# other way round the "qrels" would hold scores (3.0, 2.5...), which is refused.
QRELS_MAP = {"q1": {"d1": 1, "d3": 1}}
RUN_MAP = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}}
FRACTIONAL_RUN_MAP = {"q1": {"d1": 3.5, "d2": 2.5, "d3": 1.5}}
QRELS_TEXT = "q1 0 d1 1\nq1 0 d3 1\n"
RUN_TEXT = "q1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 2.0 r\nq1 Q0 d3 3 1.0 r\n"
MEASURES = ["map", "P.1", "num_ret", "num_rel_ret"]
WANT = {"runid": "r", "map": 5 / 6, "P_1": 1.0, "num_ret": 3, "num_rel_ret": 2}
ORDER = "evaluate(qrels, run, ...)"


def _numbers(ev) -> dict:
    return {k: v for k, v in ev.aggregate.items() if k != "runid"}


def _want() -> dict:
    return {k: v for k, v in WANT.items() if k != "runid"}


@pytest.fixture
def files(tmp_path):
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qrels.write_text(QRELS_TEXT)
    run.write_text(RUN_TEXT)
    return qrels, run


# -- evaluate: the new order gives the numbers ------------------------------------------------

@pytest.mark.parametrize("form", ["mappings", "text", "bytes", "paths", "str paths", "objects"])
def test_positional_qrels_then_run(form, files):
    qrels, run = {
        "mappings": (QRELS_MAP, RUN_MAP),
        "text": (QRELS_TEXT, RUN_TEXT),
        "bytes": (QRELS_TEXT.encode(), RUN_TEXT.encode()),
        "paths": files,
        "str paths": tuple(map(str, files)),
        "objects": (cranfield.read_qrels(QRELS_TEXT), cranfield.read_run(RUN_TEXT)),
    }[form]
    ev = cranfield.evaluate(qrels, run, MEASURES)
    assert _numbers(ev) == pytest.approx(_want())
    assert ev.aggregate["map"] == pytest.approx(5 / 6)


@pytest.mark.parametrize("call", [
    lambda: cranfield.evaluate(qrels=QRELS_MAP, run=RUN_MAP, measures=MEASURES),
    lambda: cranfield.evaluate(run=RUN_MAP, qrels=QRELS_MAP, measures=MEASURES),
    lambda: cranfield.evaluate(QRELS_MAP, run=RUN_MAP, measures=MEASURES),
    lambda: cranfield.evaluate(QRELS_MAP, RUN_MAP, MEASURES),
])
def test_keywords_in_either_order(call):
    assert _numbers(call()) == pytest.approx(_want())


def test_the_package_doctest_uses_the_order():
    failed, tried = doctest.testmod(cranfield, verbose=False)
    assert failed == 0 and tried


def test_honest_mappings_are_not_mistaken_for_a_swap():
    # qrels written as floats (1.0) beside a run of float scores; a run of integer scores
    # beside integer grades: both plausible, both evaluated
    assert _numbers(cranfield.evaluate({"q1": {"d1": 1.0, "d3": 1.0}}, RUN_MAP, MEASURES)) \
        == pytest.approx(_want())
    assert _numbers(cranfield.evaluate(QRELS_MAP, {"q1": {"d1": 3, "d2": 2, "d3": 1}},
                                       MEASURES)) == pytest.approx(_want())
    # grades written as floats (pandas) beside a run of integer scores (an impact-scored
    # engine): evaluated, as the API evaluates the same pair (found in review: refused once)
    assert _numbers(cranfield.evaluate({"q1": {"d1": 1.0, "d3": 1.0}},
                                       {"q1": {"d1": 3, "d2": 2, "d3": 1}}, MEASURES)) \
        == pytest.approx(_want())


# -- evaluate: every swapped form is refused, naming the order ------------------------------

INTEGER = "got qrels as the run: its first entry {'q1': {'d1': 1}} is an integer"
SWAPPED = [
    # (name, qrels given, run given, the reason in the message)
    ("six-field text as qrels, four-field text as run", RUN_TEXT, QRELS_TEXT,
     "got a run as qrels: its line 1 has 6 fields; got qrels as the run: its line 1 has "
     "4 fields"),
    ("bytes", RUN_TEXT.encode(), QRELS_TEXT.encode(),
     "got a run as qrels: its line 1 has 6 fields; got qrels as the run: its line 1 has 4 "
     "fields"),
    ("run text after comments, as qrels", "# a header\n\n" + RUN_TEXT, QRELS_MAP,
     "got a run as qrels: its line 3 has 6 fields; " + INTEGER),
    ("six-field text as qrels, a file object as run", RUN_TEXT, io.BytesIO(b""),
     "got a run as qrels: its line 1 has 6 fields"),
    ("fractional scores as qrels", FRACTIONAL_RUN_MAP, QRELS_MAP,
     "got a run as qrels: its first entry {'q1': {'d1': 3.5}} is a score, not a grade; "
     + INTEGER),
    ("Run as qrels", cranfield.read_run(RUN_MAP), QRELS_MAP,
     "got a cranfield.Run as qrels; " + INTEGER),
    ("Run as qrels beside a file object", cranfield.read_run(RUN_MAP), io.BytesIO(b""),
     "got a cranfield.Run as qrels"),
    ("Qrels as run", RUN_MAP, cranfield.read_qrels(QRELS_MAP),
     "got a run as qrels: its first entry {'q1': {'d1': 3.0}} is a float; got a "
     "cranfield.Qrels as the run"),
    ("Qrels as run beside a file object", io.BytesIO(b""), cranfield.read_qrels(QRELS_MAP),
     "got a cranfield.Qrels as the run"),
    ("both objects", cranfield.read_run(RUN_MAP), cranfield.read_qrels(QRELS_MAP),
     "got a cranfield.Run as qrels; got a cranfield.Qrels as the run"),
    ("four-field text as run beside an unreadable qrels", b"", QRELS_TEXT,
     "got qrels as the run: its line 1 has 4 fields"),
]


@pytest.mark.parametrize("qrels, run, reason", [case[1:] for case in SWAPPED],
                         ids=[case[0] for case in SWAPPED])
@pytest.mark.parametrize("measures", [MEASURES, ["alpha_nDCG@10"]], ids=["trec", "diversity"])
def test_swapped_arguments_are_refused(qrels, run, reason, measures):
    with pytest.raises(InputError) as exc:
        cranfield.evaluate(qrels, run, measures)
    message = str(exc.value)
    assert "swapped" in message and "evaluate(qrels, run" in message
    assert message.endswith(f": the arguments look swapped: cranfield.evaluate takes the "
                            f"qrels first, then the run — {ORDER} ({reason})")
    report = error_report(exc.value)
    assert (exc.value.code, report.status, report.exit_code) == ("invalid-input", 422, 2)


def test_swapped_files_are_refused(files):
    qrels, run = files
    with pytest.raises(InputError) as exc:
        cranfield.evaluate(run, qrels)
    assert str(exc.value) == (
        "qrels: the arguments look swapped: cranfield.evaluate takes the qrels first, then "
        "the run — evaluate(qrels, run, ...) (got a run as qrels: its line 1 has 6 fields; "
        "got qrels as the run: its line 1 has 4 fields)")
    with pytest.raises(InputError, match="swapped"):
        cranfield.evaluate(str(run), str(qrels))


# -- evaluate: bad input that is no swap keeps its own error --------------------------------

NOT_SWAPPED = [
    # (name, qrels, run, the reader whose error it must stay)
    ("a grade that is no integer", "q1 0 d1 x\n", RUN_TEXT, "qrels"),
    ("five fields", "q1 0 d1 1 extra\n", RUN_TEXT, "qrels"),
    ("six fields, no score among them", "q1 0 d1 1 x y\n", RUN_TEXT, "qrels"),
    ("two runs", RUN_TEXT, RUN_TEXT, "qrels"),
    ("two qrels", QRELS_TEXT, QRELS_TEXT, "run"),
    ("fractional grades beside a run", FRACTIONAL_RUN_MAP, FRACTIONAL_RUN_MAP, "qrels"),
    ("a Qrels beside qrels", QRELS_MAP, cranfield.read_qrels(QRELS_MAP), "run"),
    ("a Run beside a run", cranfield.read_run(RUN_MAP), RUN_TEXT, "qrels"),
]


@pytest.mark.parametrize("qrels, run, reader", [case[1:] for case in NOT_SWAPPED],
                         ids=[case[0] for case in NOT_SWAPPED])
def test_a_bad_input_keeps_its_error(qrels, run, reader):
    read = cranfield.read_qrels if reader == "qrels" else cranfield.read_run
    with pytest.raises(InputError) as want:
        read(qrels if reader == "qrels" else run)
    with pytest.raises(InputError) as got:
        cranfield.evaluate(qrels, run, MEASURES)
    assert str(got.value) == str(want.value)
    assert "swapped" not in str(got.value)


# -- compare ----------------------------------------------------------------------------------

RUNS = {"a": RUN_MAP, "b": {"q1": {"d2": 3.0, "d1": 2.0, "d3": 1.0}}}  # b: AP (1/2 + 2/3)/2


@pytest.mark.parametrize("call", [
    lambda: compare(QRELS_MAP, RUNS, ["map"], tests=["t"]),
    lambda: compare(qrels=QRELS_MAP, runs=RUNS, measures=["map"], tests=["t"]),
    lambda: compare(runs=RUNS, qrels=QRELS_TEXT, measures=["map"], tests=["t"]),
])
def test_compare_takes_the_qrels_first(call):
    doc = call()
    means = {run: doc["summary"]["map"][run]["mean"] for run in RUNS}
    assert means == pytest.approx({"a": 5 / 6, "b": 7 / 12})


@pytest.mark.parametrize("qrels, runs", [
    (RUNS, QRELS_MAP),
    (RUNS, QRELS_TEXT),
    ({"a": RUN_TEXT, "b": RUN_TEXT}, QRELS_TEXT),
    ({"a": cranfield.read_run(RUN_MAP), "b": RUN_MAP}, cranfield.read_qrels(QRELS_MAP)),
])
def test_compare_refuses_swapped_arguments(qrels, runs):
    with pytest.raises(InputError) as exc:
        compare(qrels, runs, ["map"])
    assert str(exc.value) == (
        "qrels: the arguments look swapped: cranfield.compare.compare takes the qrels first, "
        "then the runs — compare(qrels, runs, ...) (got the runs {name: run} as qrels)")


def test_compare_without_a_runs_mapping_keeps_its_error():
    with pytest.raises(InputError, match=r"^runs: must be a mapping \{name: run\}$"):
        compare(QRELS_TEXT, RUN_TEXT, ["map"])


# -- ndeval and gdeval -------------------------------------------------------------------------

WEB_RUN = "1 Q0 a 1 3.0 r\n1 Q0 b 2 2.0 r\n1 Q0 c 3 1.0 r\n"


def test_ndeval_and_gdeval_take_the_qrels_first():
    assert gdeval("1 0 a 1\n1 0 c 2\n", WEB_RUN).amean["ndcg@20"] == pytest.approx(
        0.6885288809404666)
    assert gdeval(qrels="1 0 a 1\n1 0 c 2\n", run=WEB_RUN).amean["ndcg@20"] == pytest.approx(
        0.6885288809404666)
    assert ndeval("1 1 a 1\n1 2 c 1\n", WEB_RUN).amean["strec@5"] == 1.0
    with pytest.raises(InputError, match=r"takes the qrels first, then the run — "
                                         r"gdeval\(qrels, run, \.\.\.\)"):
        gdeval(WEB_RUN, "1 0 a 1\n")
    with pytest.raises(InputError, match=r"ndeval\(qrels, run, \.\.\.\) \(got a run as qrels"):
        ndeval(WEB_RUN, "1 1 a 1\n")


# -- the client --------------------------------------------------------------------------------

@pytest.fixture
def sent(monkeypatch):
    """The bodies the client would send (no server: Client.request is replaced)."""
    bodies = []

    def request(self, method, path, body=None, **kw):
        bodies.append((method, path, body))
        return 200, {}, b"{}"

    monkeypatch.setattr(Client, "request", request)
    return bodies


@pytest.mark.parametrize("call", [
    lambda api: api.evaluate(QRELS_TEXT, RUN_TEXT, ["map"]),
    lambda api: api.evaluate(run=RUN_TEXT, qrels=QRELS_TEXT, measures=["map"]),
    lambda api: api.evaluate(QRELS_TEXT, run=RUN_TEXT, measures=["map"]),
])
def test_client_evaluate_sends_qrels_and_run_in_their_places(sent, call):
    call(Client("http://x"))
    method, path, body = sent[-1]
    assert (method, path) == ("POST", "/v1/evaluations")
    assert (body["qrels"], body["run"], body["measures"]) == (QRELS_TEXT, RUN_TEXT, ["map"])


def test_client_evaluate_with_stored_qrels_takes_the_run_by_keyword(sent):
    Client("http://x").evaluate(run=RUN_TEXT, qrels_id="dev", measures=["map"])
    body = sent[-1][2]
    assert (body["run"], body["qrels_id"], "qrels" in body) == (RUN_TEXT, "dev", False)
    Client("http://x").evaluate(None, RUN_MAP, qrels_id="dev")
    assert sent[-1][2]["run"] == RUN_MAP


def test_client_evaluate_files_go_in_their_parts(sent, files):
    qrels, run = files
    Client("http://x").evaluate(qrels, run)
    body = sent[-1][2]
    parts = body.read_all().split(b"--" + body.boundary.encode())
    run_part = next(p for p in parts if b'name="run"; filename="run.txt"' in p)
    qrels_part = next(p for p in parts if b'name="qrels"; filename="qrels.txt"' in p)
    assert run_part.endswith(b"\r\n\r\n" + RUN_TEXT.encode() + b"\r\n")
    assert qrels_part.endswith(b"\r\n\r\n" + QRELS_TEXT.encode() + b"\r\n")


@pytest.mark.parametrize("call, message", [
    (lambda api: api.evaluate(RUN_TEXT, qrels_id="dev"),
     "Client.evaluate takes the qrels first, then the run: with qrels_id, give the run by "
     "keyword — evaluate(run=..., qrels_id=...)"),
    (lambda api: api.evaluate(QRELS_TEXT),
     "Client.evaluate() needs the run: evaluate(qrels, run, ...) or "
     "evaluate(run=..., qrels_id=...)"),
    (lambda api: api.compare(QRELS_TEXT),
     "Client.compare() needs the runs: compare(qrels, runs, ...) or "
     "compare(runs=..., qrels_id=...)"),
])
def test_client_names_a_missing_run(sent, call, message):
    with pytest.raises(TypeError) as exc:
        call(Client("http://x"))
    assert str(exc.value) == message
    assert sent == []  # refused before anything is sent


@pytest.mark.parametrize("qrels, run, reason", [
    (RUN_TEXT, QRELS_TEXT, "got a run as qrels: its line 1 has 6 fields; got qrels as the "
                           "run: its line 1 has 4 fields"),
    (FRACTIONAL_RUN_MAP, QRELS_MAP, "got a run as qrels: its first entry {'q1': {'d1': 3.5}} "
                                    "is a score, not a grade; " + INTEGER),
    (cranfield.read_run(RUN_MAP), QRELS_TEXT, "got a cranfield.Run as qrels; got qrels as "
                                              "the run: its line 1 has 4 fields"),
    (FRACTIONAL_RUN_MAP, cranfield.read_qrels(QRELS_MAP),
     "got a run as qrels: its first entry {'q1': {'d1': 3.5}} is a score, not a grade; got a "
     "cranfield.Qrels as the run"),
])
def test_client_refuses_swapped_inputs_before_sending(sent, qrels, run, reason):
    api = Client("http://x")
    with pytest.raises(InputError) as exc:
        api.evaluate(qrels, run)
    assert str(exc.value).endswith(
        f"the arguments look swapped: Client.evaluate takes the qrels first, then the run — "
        f"evaluate(qrels, run, ...) ({reason})")
    assert sent == []


def test_client_compare_takes_the_qrels_first(sent):
    api = Client("http://x")
    runs = [{"run": RUN_TEXT, "name": "a"}, {"run": RUN_TEXT, "name": "b"}]
    api.compare(QRELS_TEXT, runs, measures=["map"])
    assert (sent[-1][1], sent[-1][2]["qrels"], [r["name"] for r in sent[-1][2]["runs"]]) == \
        ("/v1/comparisons", QRELS_TEXT, ["a", "b"])
    api.compare(runs=runs, qrels=QRELS_TEXT)
    assert sent[-1][2]["qrels"] == QRELS_TEXT and len(sent[-1][2]["runs"]) == 2
    api.compare(runs=runs, qrels_id="dev")
    assert (sent[-1][2]["qrels_id"], "qrels" in sent[-1][2]) == ("dev", False)
    recorded = [{"result_id": "r1"}, {"result_id": "r2"}]
    api.compare(recorded, measures=["map"])  # a list alone: the runs (no qrels needed)
    assert sent[-1][2] == {"runs": recorded, "measures": ["map"]}
    api.gate("bm25", "r9", ["map"], ["map:0.01"])
    assert json.loads(json.dumps(sent[-1][2])) == {
        "runs": [{"result_id": "r9"}], "measures": ["map"], "baseline": {"system": "bm25"},
        "gate": ["map:0.01"]}


# -- the command line: QRELS RUN, as before; swapped files refused before anything is sent -----

@pytest.mark.parametrize("server", [[], ["--server", "http://127.0.0.1:9"]],
                         ids=["local", "remote"])
def test_the_command_line_keeps_qrels_run(files, capsys, server):
    from cranfield.cli import main

    qrels, run = files
    # nothing listens on port 9: the remote command must refuse before any request
    assert main(["eval", *server, "-m", "map", str(run), str(qrels)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"cranfield: {run}: looks like a run file; trec_eval takes "
                              "QRELS first (cranfield eval QRELS RUN)\n")
    if not server:
        assert main(["eval", "-m", "map", str(qrels), str(run)]) == 0
        assert capsys.readouterr().out.split() == ["map", "all", "0.8333"]
