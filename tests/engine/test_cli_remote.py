"""The ``cranfield`` commands that work on a service (cranfield/remote_cli.py), against a
stand-in service on a loopback port that answers as the API does and keeps every request:
argument handling (``--server`` or ``CRANFIELD_SERVER``, ``--api-key`` or
``CRANFIELD_API_KEY``, labels and commits from the CI's environment), exactly one upload
per evaluation, a queued job polled and fetched as text, and the exit codes of the contract
(0 / 1 usage / 2 refused or unreachable / 3 gate failed / 4 / 5 undecided / 6 not found / 7).
The real service: tests/integration/test_cli_nightly_commands.py."""

from __future__ import annotations

import json
import threading
import xml.etree.ElementTree as ET
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cranfield.cli import main
from cranfield.remote_cli import ProgressBar, exit_code

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
RID = "a" * 32
BASE_ID = "b" * 32
TEXT = "map                   \tall\t0.1785\n"


def problem(status: int, kind: str, detail: str = "no", **extra) -> tuple:
    return status, {"type": f"https://cranfield.dev/problems/{kind}", "title": kind,
                    "status": status, "detail": detail, **extra}


def gate_doc(verdict: str) -> dict:
    check = {"measure": "map", "baseline": "sys@n1", "candidate": "sys@n2",
             "verdict": verdict, "reasons": [f"map: {verdict}"], "mean_baseline": 0.3,
             "mean_candidate": 0.2, "drop": 0.1, "relative_drop": 1 / 3, "max_drop": 0.01,
             "relative": False, "test": "randomization", "alpha": 0.05, "p_value": 0.001,
             "p_adjusted": 0.002, "offending_topics": [
                 {"topic": "q7", "baseline": 1.0, "candidate": 0.0, "drop": 1.0}]}
    return {"pairs": [{"measure": "map", "a": "sys@n1", "b": "sys@n2", "mean_diff": -0.1,
                       "ci_low": -0.15, "ci_high": -0.05}],
            "ci": {"level": 0.95}, "gate": {"verdict": verdict, "checks": [check]}}


class Service(BaseHTTPRequestHandler):
    """Answers from ``routes``: {(METHOD, path without query): answer}, an answer being
    (status, JSON body) or (status, body, headers), or a list of them given in turn."""

    routes: dict = {}
    seen: list = []

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        type(self).seen.append((self.command, self.path, dict(self.headers), body))
        key = (self.command, self.path.split("?")[0])
        answer = self.routes.get(key, problem(404, "not-found", f"nothing at {key}"))
        if isinstance(answer, list):
            answer = answer.pop(0) if len(answer) > 1 else answer[0]
        status, out, *rest = answer
        headers = rest[0] if rest else {}
        if isinstance(out, dict):
            ctype = "application/problem+json" if status >= 400 else "application/json"
            out = json.dumps(out).encode()
        else:
            ctype = headers.pop("Content-Type", "text/plain")
            out = out.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(out)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_DELETE = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def service(monkeypatch):
    for name in ("CRANFIELD_SERVER", "CRANFIELD_API_KEY", "GITHUB_ACTIONS", "GITHUB_SHA",
                 "GITHUB_RUN_NUMBER", "GITHUB_STEP_SUMMARY", "CI_PIPELINE_IID",
                 "CI_COMMIT_SHA"):
        monkeypatch.delenv(name, raising=False)
    Service.routes, Service.seen = {}, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Service)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", Service
    server.shutdown()
    thread.join()
    server.server_close()


def form(headers: dict, raw: bytes) -> dict[str, bytes]:
    message = message_from_bytes(f"Content-Type: {headers['Content-Type']}\r\n\r\n".encode()
                                 + raw)
    return {p.get_param("name", header="content-disposition"): p.get_payload(decode=True)
            for p in message.get_payload()}


# -- --server and the environment -----------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["qrels", "list"], ["qrels", "put", "q", str(DATA / "qrels.test")], ["baseline", "s"],
    ["trend", "s", "--measure", "map"], ["history", "s"],
    ["gate", "s", str(DATA / "results.test"), "--qrels-id", "q", "--gate", "map:0.01"]])
def test_no_server_is_a_usage_error(service, capsys, argv):
    assert main(argv) == 1
    assert capsys.readouterr().err == "cranfield: give --server URL or set CRANFIELD_SERVER\n"


def test_the_server_and_key_come_from_the_environment(service, monkeypatch, capsys):
    url, svc = service
    monkeypatch.setenv("CRANFIELD_SERVER", url)
    monkeypatch.setenv("CRANFIELD_API_KEY", "k-123")
    svc.routes[("GET", "/v1/qrels")] = (200, {"items": [
        {"id": "dev", "version": "0123456789abcdef", "topics": 3, "judgments": 9,
         "created": 0}], "total": 1, "offset": 0, "limit": 1000, "next": None})
    assert main(["qrels", "list"]) == 0
    [(_, path, headers, _)] = svc.seen
    assert path == "/v1/qrels?limit=1000" and headers["Authorization"] == "Bearer k-123"
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["id", "version", "topics", "judgments", "created"]
    assert lines[1].split() == ["dev", "0123456789abcdef", "3", "9", "1970-01-01T00:00:00"]


def test_a_flag_beats_the_environment(service, monkeypatch):
    url, svc = service
    monkeypatch.setenv("CRANFIELD_SERVER", "http://127.0.0.1:9")
    svc.routes[("GET", "/v1/systems/s/baseline")] = (200, {"id": RID, "label": "n1"})
    assert main(["baseline", "s", "--server", url, "--api-key", "flag"]) == 0
    assert svc.seen[0][2]["Authorization"] == "Bearer flag"


def test_an_unreachable_service_is_exit_2(service, capsys):
    assert main(["trend", "s", "--measure", "map", "--server", "http://127.0.0.1:9"]) == 2
    assert capsys.readouterr().err.startswith("cranfield: cannot reach http://127.0.0.1:9: ")


# -- exit codes of problems ------------------------------------------------------------------

@pytest.mark.parametrize("answer, code", [
    (problem(404, "not-found"), 6),
    (problem(422, "unknown-qrels"), 6),
    (problem(422, "no-baseline"), 6),
    (problem(422, "invalid-input", code="duplicate-docid"), 4),
    (problem(422, "cannot-evaluate", code="no-overlap"), 7),
    (problem(422, "invalid-input", code="invalid-input"), 2),
    (problem(422, "unknown-measure", code="unknown-measure"), 1),
    (problem(422, "unknown-measure"), 1),
    (problem(422, "invalid-request", code="invalid-request"), 2),
    (problem(412, "precondition-failed"), 2),
    (problem(413, "too-large", code="too-large"), 2),
    (problem(500, "internal"), 2),
])
def test_problems_exit_as_the_contract_says(service, capsys, answer, code):
    url, svc = service
    svc.routes[("POST", "/v1/evaluations")] = answer
    assert main(["eval", "--server", url, str(DATA / "qrels.test"),
                 str(DATA / "results.test")]) == code
    assert capsys.readouterr().err == f"cranfield: HTTP {answer[0]}: no\n"


def test_exit_code_of_a_failed_job_is_its_problem_code():
    from cranfield.client import ApiError

    assert exit_code(ApiError(422, {"type": "https://cranfield.dev/problems/job-failed",
                                    "code": "no-overlap"})) == 7
    assert exit_code(OSError("down")) == 2


# -- eval --server: one upload, a queued job fetched as text ---------------------------------

def test_a_queued_eval_is_polled_then_fetched_as_text_never_sent_again(service, capsys):
    url, svc = service
    job = {"id": "j" * 32, "status": "queued", "kind": "evaluation"}
    svc.routes[("POST", "/v1/evaluations")] = (202, job, {"Location": f"/v1/jobs/{job['id']}"})
    svc.routes[("GET", f"/v1/jobs/{job['id']}")] = [
        (200, dict(job, progress={"stage": "queued", "topics_done": 0, "topics_total": None})),
        (200, dict(job, status="started", progress={"stage": "evaluating", "topics_done": 0,
                                                    "topics_total": 3})),
        (200, dict(job, status="finished", result={"recorded": {
            "id": RID, "system": "s", "label": "n1"}})),
        (200, TEXT, {"Content-Type": "text/plain", "Cranfield-Result-Id": RID}),
    ]
    code = main(["eval", "--server", url, "--qrels-id", "dev@0123456789abcdef", "-m", "map",
                 "--record", "system=s,label=n1", "-", str(DATA / "results.test")])
    assert code == 0
    out = capsys.readouterr()
    assert out.out == TEXT
    assert out.err == f"cranfield: recorded as {RID} (s, n1)\n"
    posts = [s for s in svc.seen if s[0] == "POST"]
    assert len(posts) == 1  # one upload
    parts = form(posts[0][2], posts[0][3])
    assert parts["run"] == (DATA / "results.test").read_bytes()
    assert parts["qrels_id"] == b"dev@0123456789abcdef" and "qrels" not in parts
    gets = [(s[1], s[2]["Accept"]) for s in svc.seen if s[0] == "GET"]
    assert gets == [(f"/v1/jobs/{job['id']}", "application/json")] * 3 + [
        (f"/v1/jobs/{job['id']}", "text/plain")]


def test_eval_reads_the_run_from_standard_input(service, capsys, monkeypatch):
    import io

    url, svc = service
    svc.routes[("POST", "/v1/evaluations")] = (200, TEXT, {"Content-Type": "text/plain"})
    data = (DATA / "results.test").read_bytes()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["eval", "--server", url, "--qrels-id", "dev", "-", "-"]) == 0
    [(_, _, headers, raw)] = svc.seen
    assert form(headers, raw)["run"] == data
    assert capsys.readouterr().out == TEXT


def test_eval_with_qrels_id_and_no_server_is_a_usage_error(service, capsys):
    assert main(["eval", "--qrels-id", "dev", "-", str(DATA / "results.test")]) == 1
    assert "--qrels-id needs --server" in capsys.readouterr().err


def test_the_progress_bar_is_off_without_a_terminal(capsys):
    bar = ProgressBar()  # pytest's stderr is no terminal
    bar({"id": "j", "status": "started", "progress": {"topics_total": 5}})
    assert bar.bar is None and capsys.readouterr().err == ""


def test_the_progress_bar_counts_topics_and_shards(capsys):
    bar = ProgressBar(enabled=True)
    bar({"id": "jobid123", "status": "queued", "progress": {"stage": "queued"}})
    bar({"id": "jobid123", "status": "started", "progress": {
        "stage": "evaluating", "topics_done": 40, "topics_total": 100, "shards_done": 2,
        "shards_total": 5}})
    assert (bar.bar.n, bar.bar.total) == (40, 100)
    assert bar.bar.postfix == "status=evaluating, shards=2/5"
    bar.close()
    assert "40/100" in capsys.readouterr().err


# -- qrels put ---------------------------------------------------------------------------------

def test_qrels_put_streams_the_file_and_prints_id_at_version(service, capsys):
    url, svc = service
    svc.routes[("PUT", "/v1/qrels/dev")] = (201, {"id": "dev", "version": "0123456789abcdef",
                                                  "judgments": 3681})
    assert main(["qrels", "put", "dev", str(DATA / "qrels.test"), "--server", url,
                 "--if-match", "fedcba9876543210"]) == 0
    assert capsys.readouterr().out == "dev@0123456789abcdef\n"
    [(_, path, headers, raw)] = svc.seen
    assert headers["Content-Type"] == "text/plain" and headers["If-Match"] == \
        '"fedcba9876543210"'
    assert raw == (DATA / "qrels.test").read_bytes()


def test_qrels_put_refused_is_exit_2(service, capsys):
    url, svc = service
    svc.routes[("PUT", "/v1/qrels/dev")] = problem(412, "precondition-failed", "stale")
    assert main(["qrels", "put", "dev", str(DATA / "qrels.test"), "--server", url]) == 2
    assert capsys.readouterr().err == "cranfield: HTTP 412: stale\n"


# -- baseline ----------------------------------------------------------------------------------

def test_baseline_shows_pins_and_pins_the_latest(service, capsys):
    url, svc = service
    summary = {"id": RID, "system": "s", "label": "n1", "commit": "c0ffee",
               "created_at": "2026-11-27T06:00:00+00:00"}
    svc.routes[("GET", "/v1/systems/s/baseline")] = (200, summary)
    svc.routes[("GET", "/v1/systems/s/results")] = (200, {"items": [summary], "total": 1})
    svc.routes[("PUT", "/v1/systems/s/baseline")] = (200, summary)
    assert main(["baseline", "s", "--server", url]) == 0
    assert capsys.readouterr().out.splitlines()[1].split() == [
        "s", RID, "n1", "c0ffee", "2026-11-27T06:00:00"]
    assert main(["baseline", "s", "--latest", "--server", url, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == RID
    put = [s for s in svc.seen if s[0] == "PUT"]
    assert json.loads(put[0][3]) == {"result_id": RID}
    assert svc.seen[1][1] == "/v1/systems/s/results?offset=0&limit=1"


def test_baseline_none_pinned_is_exit_6(service, capsys):
    url, svc = service
    svc.routes[("GET", "/v1/systems/s/baseline")] = problem(404, "not-found",
                                                            "system 's' has no baseline pinned")
    assert main(["baseline", "s", "--server", url]) == 6
    assert "no baseline pinned" in capsys.readouterr().err


def test_baseline_id_and_latest_together_is_a_usage_error(service, capsys):
    url, _ = service
    assert main(["baseline", "s", RID, "--latest", "--server", url]) == 1


# -- gate --------------------------------------------------------------------------------------

def _gate_routes(svc, verdict: str | None, label: str = "n2") -> None:
    svc.routes[("POST", "/v1/evaluations")] = (200, {"aggregate": {"map": 0.2}, "recorded": {
        "id": RID, "system": "sys", "label": label}})
    svc.routes[("GET", "/v1/systems/sys/baseline")] = (
        (200, {"id": BASE_ID, "system": "sys", "label": "n1"}) if verdict else
        problem(404, "not-found", "system 'sys' has no baseline pinned"))
    svc.routes[("PUT", "/v1/systems/sys/baseline")] = (200, {"id": RID, "label": label})
    if verdict:
        svc.routes[("POST", "/v1/comparisons")] = (200, gate_doc(verdict))


GATE = ["gate", "sys", str(DATA / "results.test"), "--qrels-id", "dev", "-m", "P.5",
        "--gate", "map:0.01"]


@pytest.mark.parametrize("verdict, code", [("pass", 0), ("fail", 3), ("undecided", 5)])
def test_gate_records_then_gates_against_the_pinned_baseline(service, capsys, tmp_path,
                                                            monkeypatch, verdict, code):
    url, svc = service
    _gate_routes(svc, verdict, label="ci-42")
    monkeypatch.setenv("GITHUB_RUN_NUMBER", "42")
    monkeypatch.setenv("GITHUB_SHA", "c0ffee")
    junit, markdown = tmp_path / "g.xml", tmp_path / "g.md"
    assert main([*GATE, "--server", url, "--junit", str(junit), "--markdown",
                 str(markdown)]) == code
    out = capsys.readouterr()
    assert out.err.startswith(f"cranfield: recorded as {RID} (sys, ci-42)\n")
    assert out.out.startswith(f"gate: {verdict.upper()}\n")
    posts = [s for s in svc.seen if s[0] == "POST"]
    assert [p[1] for p in posts] == ["/v1/evaluations", "/v1/comparisons"]
    fields = form(posts[0][2], posts[0][3])
    assert json.loads(fields["record"]) == {"system": "sys", "label": "ci-42",
                                            "commit": "c0ffee"}
    comparison = json.loads(posts[1][3])
    assert comparison == {"runs": [{"result_id": RID, "name": "sys@ci-42"}],
                          "measures": ["P.5", "map"], "baseline": {"system": "sys"},
                          "gate": ["map:0.01"]}
    case = ET.parse(junit).getroot().find("testcase")
    assert case.get("classname") == "cranfield.gate.sys"
    assert (case.find("failure") is None) == (verdict == "pass")
    assert markdown.read_text().startswith(f"### Cranfield gate for sys: {verdict.upper()}")


def test_gate_on_github_actions_annotates_and_writes_the_step_summary(service, capsys,
                                                                      tmp_path, monkeypatch):
    url, svc = service
    _gate_routes(svc, "fail")
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert main([*GATE, "--server", url, "--label", "n2", "--format", "junit"]) == 3
    out = capsys.readouterr().out
    xml, annotations = out.split("</testsuite>\n")
    assert ET.fromstring(xml + "</testsuite>").get("failures") == "1"
    assert annotations.startswith("::error title=Cranfield gate failed%3A map%3A sys@n2 vs "
                                  "sys@n1::map sys@n2 vs sys@n1: FAIL; drop 0.1000 ")
    assert "worst topics: q7 (−1.0000)" in annotations
    text = summary.read_text()
    assert text.startswith("earlier step\n### Cranfield gate for sys: FAIL\n")


def test_gate_without_a_baseline_records_and_says_how_to_pin(service, capsys):
    url, svc = service
    _gate_routes(svc, None)
    assert main([*GATE, "--server", url, "--label", "n2"]) == 6
    err = capsys.readouterr().err
    assert f"Pin it with: cranfield baseline sys {RID}" in err
    assert [s[0] for s in svc.seen] == ["POST", "GET"]  # recorded; nothing gated


def test_gate_pin_if_none_pins_this_result(service, capsys, tmp_path, monkeypatch):
    """The first night pins itself, and still writes the reports a CI step reads: each gate
    a skipped test case, the Markdown (and the step summary) saying what was pinned."""
    from xml.etree import ElementTree as ET

    url, svc = service
    _gate_routes(svc, None)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    junit, markdown = tmp_path / "gate.xml", tmp_path / "gate.md"
    assert main([*GATE, "--server", url, "--label", "n2", "--pin-if-none",
                 "--junit", str(junit), "--markdown", str(markdown)]) == 0
    put = [s for s in svc.seen if s[0] == "PUT"]
    assert json.loads(put[0][3]) == {"result_id": RID}
    out = capsys.readouterr().out
    assert out.startswith("gate: BASELINE PINNED") and "::error" not in out
    suite = ET.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("skipped"), suite.get("failures")) == ("1", "1", "0")
    (case,) = suite.iter("testcase")
    assert case.get("name") == "map:0.01" and RID in case.find("skipped").get("message")
    for page in (markdown.read_text(), summary.read_text()):
        assert "BASELINE PINNED" in page and f"`{RID}` (`n2`)" in page


def test_gate_with_the_baseline_s_label_names_the_candidate_apart(service):
    url, svc = service
    _gate_routes(svc, "pass", label="n1")
    assert main([*GATE, "--server", url, "--label", "n1"]) == 0
    comparison = json.loads([s for s in svc.seen if s[1] == "/v1/comparisons"][0][3])
    assert comparison["runs"] == [{"result_id": RID, "name": f"sys@n1 ({RID[:8]})"}]


def test_gate_label_defaults_to_gitlab_then_the_time(service, capsys, monkeypatch):
    url, svc = service
    _gate_routes(svc, "pass")
    monkeypatch.setenv("CI_PIPELINE_IID", "7")
    monkeypatch.setenv("CI_COMMIT_SHA", "abc")
    main([*GATE, "--server", url])
    record = json.loads(form(svc.seen[0][2], svc.seen[0][3])["record"])
    assert record == {"system": "sys", "label": "ci-7", "commit": "abc"}
    monkeypatch.delenv("CI_PIPELINE_IID")
    svc.seen.clear()
    main([*GATE, "--server", url])
    label = json.loads(form(svc.seen[0][2], svc.seen[0][3])["record"])["label"]
    assert len(label) == 20 and label.endswith("Z") and label[10] == "T"


def test_a_malformed_gate_is_refused_before_anything_is_sent(service, capsys):
    url, svc = service
    with pytest.raises(SystemExit) as info:
        main(["gate", "sys", str(DATA / "results.test"), "--qrels-id", "dev", "--gate",
              "map", "--server", url])
    assert info.value.code == 2 and svc.seen == []


# -- trend -------------------------------------------------------------------------------------

def test_trend_saves_the_page_and_prints_the_table(service, capsys, tmp_path):
    url, svc = service
    point = {"id": RID, "label": "n1", "created_at": "2026-11-27T06:00:00+00:00",
             "mean": 0.25, "ci_low": 0.2, "ci_high": 0.3, "n_topics": 3,
             "gate": {"verdict": "fail"}}
    svc.routes[("GET", "/v1/systems/s/trend")] = [
        (200, "<html>trend</html>", {"Content-Type": "text/html"}),
        (200, {"system": "s", "measure": "ndcg_cut_10", "baseline": RID, "points": [point]})]
    page = tmp_path / "page.html"
    assert main(["trend", "s", "--measure", "nDCG@10", "-o", str(page), "--server", url,
                 "--limit", "5"]) == 0
    assert page.read_text() == "<html>trend</html>"
    out = capsys.readouterr()
    assert out.err == f"cranfield: trend page saved to {page}\n"
    lines = out.out.splitlines()
    assert lines[0].split()[:3] == ["recorded", "label", "ndcg_cut_10"]
    assert lines[1].split() == ["2026-11-27T06:00:00", "n1", "0.2500", "[0.2000,", "0.3000]",
                                "3", "fail", "*", RID]
    assert [(s[1], s[2]["Accept"]) for s in svc.seen] == [
        ("/v1/systems/s/trend?measure=nDCG%4010&limit=5", "text/html"),
        ("/v1/systems/s/trend?measure=nDCG%4010&limit=5", "application/json")]


def test_the_trend_table_names_each_points_qrels(service, capsys):
    """A re-scored night is a second point of the same time and label (issue #31): the table
    says which qrels each point is under, from the trend's series (review R31 finding 5)."""
    url, svc = service
    a, a2, b = "a" * 32, "b" * 32, "c" * 32

    def point(pid, mean):
        return {"id": pid, "label": "n1", "created_at": "2026-11-27T06:00:00.000000Z",
                "mean": mean, "ci_low": None, "ci_high": None, "n_topics": 2, "gate": None}

    svc.routes[("GET", "/v1/systems/s/trend")] = (200, {
        "system": "s", "measure": "map", "baseline": None,
        "points": [point(a, 0.5), point(a2, 0.25), point(b, 0.75)],
        "series": [{"qrels_version": "q@1", "qrels_versions": ["q@1"], "qrels_sha256": "1" * 64,
                    "points": [point(a, 0.5) | {"rescores": None}]},
                   {"qrels_version": None, "qrels_versions": [], "qrels_sha256": "f" * 64,
                    "points": [point(b, 0.75) | {"rescores": None}]},
                   {"qrels_version": "q@2", "qrels_versions": ["q@2"], "qrels_sha256": "2" * 64,
                    "points": [point(a2, 0.25) | {"rescores": a}]}]})
    assert main(["trend", "s", "--measure", "map", "--server", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["recorded", "label", "qrels", "map"]
    assert [line.split()[2:5] for line in lines[1:]] == [
        ["q@1", "0.5000", "[-,"], ["q@2", "(re-score)", "0.2500"],
        ["sha256:ffffffffffff", "0.7500", "[-,"]]


def test_history_of_an_unknown_system_is_exit_6(service, capsys):
    url, svc = service
    svc.routes[("GET", "/v1/systems/nope/results")] = problem(404, "not-found",
                                                              "no system 'nope'")
    assert main(["history", "nope", "--server", url]) == 6
    assert capsys.readouterr().err == "cranfield: HTTP 404: no system 'nope'\n"


def test_eval_on_a_service_starts_light():
    """``cranfield eval --server`` imports none of the engine's heavier parts (pyarrow,
    scipy, pandas, numba) nor the service's; tqdm only with a terminal."""
    import subprocess
    import sys

    code = ("import sys\nfrom cranfield.cli import main\n"
            f"main(['eval', '--server', 'http://127.0.0.1:9', '--qrels-id', 'x', '-', "
            f"{str(DATA / 'results.test')!r}])\n"
            "print(sorted(m for m in ('pyarrow', 'scipy', 'pandas', 'numba', 'tqdm', 'flask', "
            "'sqlalchemy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert done.stderr.startswith("cranfield: cannot reach http://127.0.0.1:9")


def test_the_progress_bar_counts_shards_until_the_topics_are_known(capsys):
    bar = ProgressBar(enabled=True)
    bar({"id": "jobid123", "status": "started", "progress": {
        "stage": "evaluating", "topics_done": 125, "topics_total": None, "shards_done": 1,
        "shards_total": 4}})
    assert (bar.bar.n, bar.bar.total, bar.bar.unit) == (1, 4, " shards")
    bar({"id": "jobid123", "status": "finished", "progress": {
        "stage": "done", "topics_done": 500, "topics_total": 500, "shards_done": 4,
        "shards_total": 4}})
    assert (bar.bar.n, bar.bar.total, bar.bar.unit) == (500, 500, " topics")
    bar.close()


@pytest.mark.parametrize("problem, said", [
    # the field is named once; the detail's words are not repeated
    ({"detail": "measure 'P_5' is not recorded", "errors": {"measure": [
        "measure 'P_5' is not recorded"]}}, "HTTP 404: measure 'P_5' is not recorded"),
    # a field the detail does not name is kept, with its reason
    ({"detail": "run:1: score: 'x' is not a number", "errors": {"run line 1": [
        "'x' is not a number"]}},
     "HTTP 404: run:1: score: 'x' is not a number (run line 1: 'x' is not a number)"),
    ({"detail": "bad request", "errors": {"measures[0]": ["unknown measure 'mapp'"]}},
     "HTTP 404: bad request (measures[0]: unknown measure 'mapp')"),
    ({"title": "Not Found"}, "HTTP 404: Not Found"),
])
def test_an_api_error_says_each_thing_once(problem, said):
    from cranfield.client import ApiError

    assert str(ApiError(404, problem)) == said


def test_a_report_that_cannot_be_written_is_said_as_such_not_as_an_unreachable_service(
        service, capsys, tmp_path):
    """The service answered; the file -o names cannot be written (no such folder): exit 2
    saying the file, not 'cannot reach' the service."""
    url, svc = service
    svc.routes[("GET", "/v1/systems/s/trend")] = (200, "<html>trend</html>",
                                                  {"Content-Type": "text/html"})
    page = tmp_path / "missing" / "page.html"
    assert main(["trend", "s", "--measure", "map", "-o", str(page), "--server", url]) == 2
    err = capsys.readouterr().err
    assert "cannot reach" not in err
    assert err == f"cranfield: {page}: No such file or directory\n"
