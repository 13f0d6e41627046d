"""``cranfield.evaluate_many`` (issue #30): several runs against one qrels, each run's
Evaluation equal to ``cranfield.evaluate``'s, the qrels read once, the first bad run's error
naming it; and ``cranfield eval QRELS RUN [RUN ...]`` printing what the single-run calls print."""

from __future__ import annotations

import importlib
import json
import math
import subprocess
import sys
import threading
from collections import OrderedDict, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

import cranfield
from cranfield.cli import main
from cranfield.errors import CranfieldError, EvaluationError, InputError
from cranfield.evaluate_many import iter_evaluations, run_names_of
from cranfield.inputs import io
from cranfield.reports.result_document import warnings_for

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
QRELS, RESULTS, TRUNC = DATA / "qrels.test", DATA / "results.test", DATA / "results.trunc"
evaluate_many_module = importlib.import_module("cranfield.evaluate_many")
MEASURES = ["map", "P.5", "ndcg_cut.10", "recall.1000", "num_ret", "runid"]


def _same(a, b) -> bool:
    """Equal values, NaN equal to NaN."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def assert_same_evaluation(got, want):
    assert _same(got.per_topic, want.per_topic)
    assert _same(got.aggregate, want.aggregate)
    assert got.topics.as_dict() == want.topics.as_dict()
    assert got.runid == want.runid and got.options == want.options
    assert got.measures == want.measures
    assert got.topic_order == want.topic_order
    assert warnings_for(got, "cli") == warnings_for(want, "cli")
    assert got.cutoff_ties.keys() == want.cutoff_ties.keys()
    for k in got.cutoff_ties:
        assert np.array_equal(got.cutoff_ties[k], want.cutoff_ties[k])


def run_mapping(path: Path) -> dict:
    out: dict = {}
    for line in path.read_text().splitlines():
        topic, _, doc, _, score, _ = line.split()[:6]
        out.setdefault(topic, {})[doc] = float(score)
    return out


def qrels_mapping(path: Path) -> dict:
    out: dict = {}
    for line in path.read_text().splitlines():
        topic, _, doc, grade = line.split()
        out.setdefault(topic, {})[doc] = int(grade)
    return out


def test_paths_each_equal_to_evaluate_and_named_as_compare_names_them():
    got = cranfield.evaluate_many(QRELS, [RESULTS, str(TRUNC)], MEASURES)
    # the stems clash (results): the file names tell them apart
    assert list(got) == ["results.test", "results.trunc"]
    assert_same_evaluation(got["results.test"], cranfield.evaluate(QRELS, RESULTS, MEASURES))
    assert_same_evaluation(got["results.trunc"], cranfield.evaluate(QRELS, TRUNC, MEASURES))


@pytest.mark.parametrize("form", ["path", "str path", "text", "bytes", "mapping",
                                  "defaultdict", "OrderedDict", "Run"])
@pytest.mark.parametrize("options", [{}, {"complete_topics": True, "depth": 5},
                                     {"profile": "trec_eval-10", "judged_only": True},
                                     {"relevance_level": 2, "aggregation": "micro",
                                      "measures": ["set_P", "set_F", "map"]}])
def test_each_run_equals_evaluate(form, options):
    options = dict(options)
    measures = options.pop("measures", MEASURES)

    def as_form(path: Path):
        if form == "path":
            return path
        if form == "str path":
            return str(path)
        if form == "text":
            return path.read_text()
        if form == "bytes":
            return path.read_bytes()
        mapping = run_mapping(path)
        if form == "defaultdict":
            return defaultdict(dict, mapping)
        if form == "OrderedDict":
            return OrderedDict(mapping)
        if form == "Run":
            return cranfield.read_run(path)
        return mapping

    runs = {"full": as_form(RESULTS), "trunc": as_form(TRUNC)}
    got = cranfield.evaluate_many(QRELS, runs, measures, **options)
    assert list(got) == ["full", "trunc"]
    for name, run in runs.items():
        assert_same_evaluation(got[name], cranfield.evaluate(QRELS, run, measures, **options))


@pytest.mark.parametrize("qrels_form", ["path", "text", "mapping", "Qrels"])
def test_qrels_in_any_form(qrels_form):
    qrels = {"path": QRELS, "text": QRELS.read_text(), "mapping": qrels_mapping(QRELS),
             "Qrels": cranfield.read_qrels(QRELS)}[qrels_form]
    got = cranfield.evaluate_many(qrels, {"a": RESULTS, "b": TRUNC}, MEASURES)
    for name, run in (("a", RESULTS), ("b", TRUNC)):
        assert_same_evaluation(got[name], cranfield.evaluate(qrels, run, MEASURES))


def test_side_inputs_and_default_measures():
    metadata = "301 news 2\n302 news\n303 web\n"
    got = cranfield.evaluate_many(QRELS, [RESULTS], topic_metadata=metadata)
    want = cranfield.evaluate(QRELS, RESULTS, topic_metadata=metadata)
    assert_same_evaluation(got["results"], want)
    assert got["results"].segments == want.segments
    assert _same(got["results"].weighted, want.weighted)


def test_the_qrels_are_read_once(monkeypatch):
    calls = []
    real = io.read_qrels

    def counting(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(evaluate_many_module, "read_qrels", counting)
    monkeypatch.setattr(importlib.import_module("cranfield.evaluate"), "read_qrels", counting)
    runs = [RESULTS, TRUNC, RESULTS.read_text(), run_mapping(TRUNC)]
    got = cranfield.evaluate_many(QRELS, runs, MEASURES)
    assert calls == [QRELS]
    assert list(got) == ["results.test", "results.trunc", "run3", "run4"]


def test_sequence_names():
    assert run_names_of([RESULTS, TRUNC, "q1 Q0 d1 1 1.0 r\n", {"q1": {"d1": 1.0}}]) == [
        "results.test", "results.trunc", "run3", "run4"]
    assert run_names_of([Path("a/ql.txt"), "b/bm25.run", "-"]) == ["ql", "bm25", "stdin"]
    assert run_names_of({"x": 1, "y": 2}) == ["x", "y"]
    with pytest.raises(TypeError):
        run_names_of("runs/ql.txt")  # a path, not a sequence of runs
    with pytest.raises(TypeError):
        run_names_of({1: RESULTS})


def test_a_mapping_run_is_refused_under_its_name():
    good = run_mapping(RESULTS)
    bad = {"301": {"d1": float("inf")}}
    with pytest.raises(InputError) as caught:
        cranfield.evaluate_many(QRELS, {"good": good, "bm25": bad, "later": {"x": 1}})
    with pytest.raises(InputError) as single:
        cranfield.evaluate(QRELS, bad)
    exc = caught.value
    assert exc.run == "bm25" and exc.field == "bm25.301.d1"
    assert str(exc) == str(single.value).replace("run.301.d1", "bm25.301.d1")
    assert (exc.code, exc.reason) == (single.value.code, single.value.reason)


def test_a_file_run_is_refused_under_its_path(tmp_path):
    bad = tmp_path / "bad.run"
    bad.write_text("301 Q0 d1 1 nan r\n")
    with pytest.raises(InputError) as caught:
        cranfield.evaluate_many(QRELS, [RESULTS, bad])
    with pytest.raises(InputError) as single:
        cranfield.evaluate(QRELS, bad)
    assert str(caught.value) == str(single.value) and caught.value.run == "bad"
    missing = tmp_path / "missing.run"
    with pytest.raises(InputError) as caught:
        cranfield.evaluate_many(QRELS, [str(missing)])
    with pytest.raises(InputError) as single:
        cranfield.evaluate(QRELS, str(missing))
    assert str(caught.value) == str(single.value) and caught.value.run == "missing"


def test_text_runs_are_refused_under_their_names():
    bad = "301 Q0 d1 1 x r\n"
    with pytest.raises(InputError) as caught:
        cranfield.evaluate_many(QRELS, {"sweep-3": bad})
    with pytest.raises(InputError) as single:
        cranfield.evaluate(QRELS, bad)
    assert caught.value.source == "sweep-3" and caught.value.run == "sweep-3"
    assert caught.value.reason == single.value.reason


def test_evaluation_errors_keep_their_type_and_name_the_run():
    with pytest.raises(EvaluationError) as caught:
        cranfield.evaluate_many(QRELS, {"ok": RESULTS, "elsewhere": {"999": {"d": 1.0}}})
    with pytest.raises(EvaluationError) as single:
        cranfield.evaluate(QRELS, {"999": {"d": 1.0}})
    assert str(caught.value) == str(single.value)
    assert (caught.value.code, caught.value.run) == ("no-overlap", "elsewhere")
    assert "(while evaluating run 'elsewhere')" in caught.value.__notes__


def test_runs_before_a_bad_one_are_yielded():
    seen = []
    with pytest.raises(CranfieldError):
        for name, ev in iter_evaluations(QRELS, {"a": RESULTS, "b": "301 Q0 d1 1 x r\n",
                                                 "c": TRUNC}):
            seen.append((name, ev.runid))
    assert seen == [("a", cranfield.evaluate(QRELS, RESULTS).runid)]


def test_options_and_measures_are_refused_before_any_input_is_read(monkeypatch):
    def unread(*args, **kwargs):
        raise AssertionError("read")

    monkeypatch.setattr(evaluate_many_module, "read_run", unread)
    monkeypatch.setattr(evaluate_many_module, "judged_qrels", unread)
    for kwargs, error in (({"measures": ["no_such"]}, cranfield.MeasureError),
                          ({"depth": -1}, EvaluationError),
                          ({"profile": "x"}, EvaluationError)):
        with pytest.raises(error):
            cranfield.evaluate_many(QRELS, [RESULTS], **kwargs)


def test_swapped_arguments_are_refused():
    with pytest.raises(InputError, match="evaluate_many takes the qrels first"):
        cranfield.evaluate_many(RESULTS, [QRELS])
    with pytest.raises(InputError, match="evaluate_many takes the qrels first"):
        cranfield.evaluate_many({"a": run_mapping(RESULTS)}, QRELS)


def test_diversity_measures_read_subtopic_qrels_once():
    qrels = "1 1 a 1\n1 2 a 1\n1 2 b 1\n2 1 c 1\n"
    runs = {"x": "1 Q0 a 1 3 x\n1 Q0 b 2 2 x\n2 Q0 c 1 1 x\n",
            "y": "1 Q0 b 1 3 y\n1 Q0 a 2 2 y\n2 Q0 d 1 1 y\n"}
    measures = ["alpha_nDCG@10", "runid"]
    got = cranfield.evaluate_many(qrels, runs, measures)
    for name, run in runs.items():
        assert_same_evaluation(got[name], cranfield.evaluate(qrels, run, measures))


def test_judgment_groups_run_by_run():
    qrels = (DATA / "qrels.test").read_text()
    got = cranfield.evaluate_many(qrels, {"a": RESULTS, "b": TRUNC}, ["map_avgjg"],
                                  qrels_format="qrels_jg")
    for name, run in (("a", RESULTS), ("b", TRUNC)):
        want = cranfield.evaluate(qrels, run, ["map_avgjg"], qrels_format="qrels_jg")
        assert _same(got[name].per_topic, want.per_topic)
        assert _same(got[name].summary(), want.summary())


def test_compare_evaluates_through_it(monkeypatch):
    from cranfield.compare import comparison

    seen = []
    real = comparison.evaluate_many

    def spy(qrels, runs, *args, **kwargs):
        seen.append(list(runs))
        return real(qrels, runs, *args, **kwargs)

    monkeypatch.setattr(comparison, "evaluate_many", spy)
    doc = comparison.compare(QRELS, {"a": RESULTS, "b": TRUNC}, ["map"],
                             tests=("t",))
    assert seen == [["a", "b"]]
    assert [r["name"] for r in doc["runs"]] == ["a", "b"]


# ---- cranfield eval QRELS RUN [RUN ...] ------------------------------------------------------

RUNID_LINE = "runid                 \tall\t%s\n"


def cranfield_eval(*args) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("cranfield")
    return subprocess.run([str(exe), "eval", *map(str, args)], capture_output=True, text=True)


def single_outputs(*options, runs=(RESULTS, TRUNC)) -> list[str]:
    outs = []
    for run in runs:
        done = cranfield_eval(*options, QRELS, run)
        assert done.returncode == 0, done.stderr
        outs.append(done.stdout)
    return outs


def test_cli_default_measures_print_the_single_outputs_one_after_the_other():
    # the official set has runid: each block starts with it already, nothing is added
    done = cranfield_eval(QRELS, RESULTS, TRUNC)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "".join(single_outputs())
    assert done.stdout.startswith(RUNID_LINE % "STANDARD")
    assert "cranfield: warning: run results.trunc: 1 judged topic(s) are missing" in done.stderr
    assert "runs results.test and results.trunc share the runid 'STANDARD'" in done.stderr


def test_cli_blocks_start_with_trec_evals_runid_line():
    options = ["-q", "-m", "map", "-m", "P.5"]
    done = cranfield_eval(*options, QRELS, RESULTS, TRUNC, RESULTS)
    assert done.returncode == 0, done.stderr
    first, second = single_outputs(*options)
    assert done.stdout == "".join(RUNID_LINE % "STANDARD" + block
                                  for block in (first, second, first))


def test_cli_csv_has_a_run_column_and_one_header():
    options = ["--format", "csv", "-q", "-m", "map", "-m", "P.5"]
    done = cranfield_eval(*options, QRELS, RESULTS, TRUNC)
    assert done.returncode == 0, done.stderr
    first, second = (text.splitlines() for text in single_outputs(*options))
    assert first[0] == second[0] == "topic,map,P_5"
    assert done.stdout.splitlines() == [
        "run,topic,map,P_5", *(f"results.test,{row}" for row in first[1:]),
        *(f"results.trunc,{row}" for row in second[1:])]


def test_cli_jsonl_lines_have_a_run_key():
    options = ["--format", "jsonl", "-q", "-m", "map", "-m", "runid"]
    done = cranfield_eval(*options, QRELS, RESULTS, TRUNC)
    assert done.returncode == 0, done.stderr
    want = [{"run": name, **json.loads(line)}
            for name, text in zip(["results.test", "results.trunc"], single_outputs(*options),
                                  strict=True)
            for line in text.splitlines()]
    got = [json.loads(line) for line in done.stdout.splitlines()]
    assert got == want and all(list(line)[0] == "run" for line in got)


def test_cli_json_is_one_document_of_the_single_documents():
    options = ["--format", "json", "-m", "map", "-m", "P.10"]
    done = cranfield_eval(*options, QRELS, RESULTS, TRUNC)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    singles = [json.loads(text) for text in single_outputs(*options)]
    assert list(doc) == ["evaluations", "qrels"]
    assert [e.pop("name") for e in doc["evaluations"]] == ["results.test", "results.trunc"]
    for got, want in zip(doc["evaluations"], singles, strict=True):
        for d in (got, want):
            d.get("provenance", {}).pop("latency_ms", None)
        assert got == want
    assert doc["qrels"]["sha256"] == singles[0]["provenance"]["qrels_sha256"]


def test_cli_a_bad_run_stops_after_the_blocks_before_it(tmp_path):
    bad = tmp_path / "bad.run"
    bad.write_text("301 Q0 d1 1 x r\n")
    done = cranfield_eval("-m", "map", QRELS, RESULTS, bad, TRUNC)
    single = cranfield_eval("-m", "map", QRELS, bad)
    assert (done.returncode, single.returncode) == (2, 2)
    assert done.stdout == RUNID_LINE % "STANDARD" + single_outputs("-m", "map")[0]
    assert done.stderr.splitlines()[-1] == single.stderr.splitlines()[-1] == \
        f"cranfield: {bad}:1: score: 'x' is not a number"


def test_cli_an_error_not_naming_the_file_names_the_run(tmp_path):
    elsewhere = tmp_path / "elsewhere.run"
    elsewhere.write_text("999 Q0 d1 1 1.0 r\n")
    done = cranfield_eval("-m", "map", QRELS, elsewhere, RESULTS)
    assert done.returncode == 7 and done.stdout == ""
    assert done.stderr == ("cranfield: run elsewhere: no topic has both results and relevance "
                           "judgments (run topics: 1, qrels topics: 3)\n")


@pytest.mark.parametrize("options, message", [
    (["--server", "http://127.0.0.1:9", "--record", "system=s,label=l"],
     "--record keeps one result"),
    (["-R", "qrels_jg"], "-R qrels_jg evaluates one RUN per call"),
])
def test_cli_several_runs_refused_with_record_and_judgment_groups(options, message):
    done = cranfield_eval(*options, QRELS, RESULTS, TRUNC)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"cranfield: {message}")


def test_cli_one_run_prints_as_before():
    done = cranfield_eval(QRELS, RESULTS)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (DATA / "v9.0.8" / "out.test").read_text()


class BatchService(BaseHTTPRequestHandler):
    """A stand-in for ``POST /v1/evaluations/batch``: evaluates what it is sent with
    cranfield.evaluate_many and answers the batch document; keeps every request."""

    seen: list = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        from cranfield.reports.result_document import evaluation_document

        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append((self.path, body))
        evs = cranfield.evaluate_many(body["qrels"], {r["name"]: r["run"] for r in body["runs"]},
                                      body.get("measures"), **body.get("options", {}))
        docs = [{"name": name, **evaluation_document(
            ev, {"per_topic": body.get("per_topic", True), "curves": False}, "r", "q", None)}
            for name, ev in evs.items()]
        out = json.dumps({"evaluations": docs, "qrels": {"sha256": "q"}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


@pytest.fixture
def batch_service(monkeypatch):
    for name in ("CRANFIELD_SERVER", "CRANFIELD_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    BatchService.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), BatchService)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join()
    server.server_close()


@pytest.mark.parametrize("options", [["-m", "map", "-m", "P.5", "-q"],
                                     ["--format", "csv", "-m", "map", "-q"],
                                     ["--format", "jsonl", "-m", "map"]])
def test_cli_server_sends_one_batch_and_prints_as_locally(batch_service, capsys, options):
    local = main(["eval", *options, str(QRELS), str(RESULTS), str(TRUNC)])
    want = capsys.readouterr()
    code = main(["eval", "--server", batch_service, *options, str(QRELS), str(RESULTS),
                 str(TRUNC)])
    got = capsys.readouterr()
    assert (code, local) == (0, 0)
    assert got.out == want.out
    assert got.err == want.err  # the lint, per run, and the shared runid
    ((path, body),) = BatchService.seen
    assert path == "/v1/evaluations/batch"
    assert [r["name"] for r in body["runs"]] == ["results.test", "results.trunc"]
