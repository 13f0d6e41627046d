"""POST /v1/evaluations with ``options.qrels_format`` (trec_eval's -R qrels_jg, prefs,
qrels_prefs; issue #28): text/plain equals ``cranfield eval -R`` and NIST's out.test.*
files; the JSON document carries trec_eval's numbers; the JSON shapes and the text give the
same answer or the same refusal; stored qrels of those kinds keep their kind (header,
digest) and are evaluated as it; options that do not apply, and work over a budget, are
refused before work. Every response is checked against openapi.yaml (ContractClient)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from conftest import ContractClient, finished_job

import cranfield
from cranfield.cli import main
from service.app import create_app

TE = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
ASYNC = {"Prefer": "respond-async"}
TEXT = {"Accept": "text/plain"}

# (format, qrels file, run file, nickname, trec_eval's expected output)
CASES = {
    "prefs": ("prefs.test", "prefs.results.test", "all_prefs", "out.test.prefs"),
    "qrels_prefs": ("qrels.test", "results.test", "all_prefs", "out.test.qrels_prefs"),
    "qrels_jg": ("qrels.123", "results.test", "qrels_jg", "out.test.qrels_jg"),
}


def body(fmt: str, qrels=None, **extra) -> dict:
    qrels_file, run_file, nickname, _ = CASES[fmt]
    out = {"run": (TE / run_file).read_text(),
           "qrels": (TE / qrels_file).read_text() if qrels is None else qrels,
           "measures": [nickname], "per_topic": True,
           "options": {"profile": "trec_eval-10", "qrels_format": fmt}}
    out.update(extra)
    return out


def lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()
            if line.split() and not line.startswith("#")]


def as_mapping(fmt: str) -> dict:
    """The qrels file of ``fmt`` in its JSON shape (JudgmentGroupsMapping or
    PreferencesMapping), numbers as JSON numbers."""
    out: dict = {}
    for fields in lines(TE / CASES[fmt][0]):
        if fmt == "prefs":
            qid, jg, jsg, docno, level = fields
            out.setdefault(qid, {}).setdefault(jg, {}).setdefault(jsg, {})[docno] = \
                float(level) if "." in level else int(level)
        else:
            qid, jg, docno, rel = fields
            out.setdefault(qid, {}).setdefault(jg, {})[docno] = int(rel)
    return out


def cli_text(capsys, fmt: str) -> str:
    qrels_file, run_file, nickname, _ = CASES[fmt]
    code = main(["eval", "--profile", "10", "-q", "-m", nickname, "-R", fmt,
                 str(TE / qrels_file), str(TE / run_file)])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def expected_values(fmt: str) -> dict[str, dict[str, str]]:
    """trec_eval's printed values: topic (or all) -> measure -> text."""
    out: dict[str, dict[str, str]] = {}
    for name, topic, value in lines(TE / CASES[fmt][3]):
        out.setdefault(topic, {})[name] = value
    return out


def without_digest(doc: dict) -> dict:
    """A document less the qrels digest: text is hashed as sent, a JSON shape by its
    canonical text (the one thing that tells the two apart)."""
    return dict(doc, provenance={k: v for k, v in doc["provenance"].items()
                                 if k != "qrels_sha256"})


@pytest.mark.parametrize("fmt", list(CASES))
def test_text_equals_upstream_and_the_cli(client, capsys, fmt):
    resp = client.post("/v1/evaluations", json=body(fmt), headers=TEXT)
    assert resp.status_code == 200, resp.get_data()
    expected = (TE / CASES[fmt][3]).read_text()
    assert resp.get_data(as_text=True) == cli_text(capsys, fmt) == expected


@pytest.mark.parametrize("fmt", list(CASES))
def test_json_has_trec_eval_s_numbers_and_the_library_s(client, fmt):
    resp = client.post("/v1/evaluations", json=body(fmt))
    assert resp.status_code == 200, resp.get_data()
    doc = resp.get_json()
    qrels_file, run_file, nickname, _ = CASES[fmt]
    ev = cranfield.evaluate(TE / qrels_file, TE / run_file, [nickname],
                            profile="trec_eval-10", qrels_format=fmt)
    assert doc["per_topic"] == ev.per_topic
    want = trec_eval = expected_values(fmt)
    summary = ev.summary()
    for name in ev.names:
        value = doc["aggregate"][name]
        assert value == pytest.approx(summary[name], abs=0, rel=0)
        if name in ev.counts:  # counts are integers, summed
            assert isinstance(value, int) and str(value) == want["all"][name]
        else:
            assert f"{value:.4f}" == want["all"][name]
        for topic, row in doc["per_topic"].items():
            text = f"{row[name]}" if name in ev.counts else f"{row[name]:.4f}"
            assert text == trec_eval[topic][name], (topic, name)
    assert doc["aggregate"]["num_q"] == int(want["all"]["num_q"]) == len(doc["per_topic"])
    assert doc["aggregate"]["runid"] == want["all"]["runid"]
    assert doc["provenance"]["options"]["qrels_format"] == fmt
    assert doc["topics"]["evaluated"] == list(ev.per_topic)


@pytest.mark.parametrize("fmt", list(CASES))
def test_json_shape_and_text_give_one_answer(client, fmt):
    as_text = client.post("/v1/evaluations", json=body(fmt))
    as_json = client.post("/v1/evaluations", json=body(fmt, qrels=as_mapping(fmt)))
    assert as_text.status_code == as_json.status_code == 200, as_json.get_data()
    assert without_digest(as_json.get_json()) == without_digest(as_text.get_json())
    text = client.post("/v1/evaluations", json=body(fmt), headers=TEXT)
    mapped = client.post("/v1/evaluations", json=body(fmt, qrels=as_mapping(fmt)),
                         headers=TEXT)
    assert mapped.get_data() == text.get_data() == (TE / CASES[fmt][3]).read_bytes()


def test_json_shape_and_text_give_one_refusal(client):
    # a judgment group whose sub-groups prefer a over b and b over a: refused by the
    # evaluation, whichever way the preferences were written
    cyclic_text = "q1 g s1 a 2\nq1 g s1 b 1\nq1 g s2 b 2\nq1 g s2 a 1\n"
    cyclic = {"q1": {"g": {"s1": {"a": 2, "b": 1}, "s2": {"b": 2, "a": 1}}}}
    run = "q1 Q0 a 1 2.0 r\nq1 Q0 b 2 1.0 r\n"
    answers = [client.post("/v1/evaluations", json={
        "run": run, "qrels": qrels, "options": {"qrels_format": "prefs"}}) for qrels in
        (cyclic_text, cyclic)]
    assert [a.status_code for a in answers] == [422, 422]
    assert answers[0].get_json() == answers[1].get_json()
    assert "inconsistent" in answers[0].get_json()["detail"]


@pytest.mark.parametrize("qrels, field, reason", [
    ({"q1": {"g": {"d1": 1.5}}}, "qrels.q1.g.d1", "rel 1.5 is not an integer"),
    ({"q1": {"g": {"d 1": 1}}}, "qrels.q1.g.d 1", "may not contain a space"),
    ({"q1": {}}, "qrels.q1", "has no judgment groups"),
    ({"q1": {"g": 1}}, "qrels.q1.g", "must be an object of docnos"),
    ("q1 g d1 1.5\n", "qrels line 1", "is not an integer"),
    ("q1 g d1\n", "qrels line 1", "four fields"),
])
def test_bad_judgment_groups_are_422_naming_the_path_or_line(client, qrels, field, reason):
    resp = client.post("/v1/evaluations", json={
        "run": "q1 Q0 d1 1 1.0 r\n", "qrels": qrels, "options": {"qrels_format": "qrels_jg"}})
    assert resp.status_code == 422, resp.get_data()
    problem = resp.get_json()
    assert resp.mimetype == "application/problem+json"
    assert any(reason in m for m in problem["errors"][field]), problem


def test_multipart_equals_json(client):
    qrels_file, run_file, _, expected = CASES["prefs"]
    resp = client.post("/v1/evaluations", headers=TEXT, data={
        "run": (io.BytesIO((TE / run_file).read_bytes()), "run.txt"),
        "qrels": (io.BytesIO((TE / qrels_file).read_bytes()), "prefs.txt"),
        "qrels_format": "prefs", "measures": "all_prefs", "per_topic": "true",
        "profile": "trec_eval-10"}, content_type="multipart/form-data")
    assert resp.status_code == 200, resp.get_data()
    assert resp.get_data() == (TE / expected).read_bytes()


@pytest.mark.parametrize("extra, field", [
    ({"options": {"qrels_format": "prefs", "relevance_level": 2}}, "options.relevance_level"),
    ({"options": {"qrels_format": "prefs", "aggregation": "micro"}}, "options.aggregation"),
    ({"options": {"qrels_format": "qrels_jg", "collection_size": 5}, "qrels": "q1 g d1 1\n"},
     "options.collection_size"),
    ({"options": {"qrels_format": "prefs", "zscores": {"q1": {"prefs_simp": [0, 1]}}}},
     "options.zscores"),
    ({"options": {"qrels_format": "prefs"}, "details": True}, "details"),
    ({"options": {"qrels_format": "prefs"}, "curves": True}, "curves"),
    ({"options": {"qrels_format": "prefs"}, "record": {"system": "s", "label": "l"}},
     "record"),
    ({"options": {"qrels_format": "prefs"}, "measures": ["map"]}, "measures[0]"),
    ({"options": {"qrels_format": "pref"}}, "options.qrels_format"),
])
def test_what_does_not_apply_is_refused_naming_it(client, extra, field):
    resp = client.post("/v1/evaluations", json={"run": "q1 Q0 d1 1 1.0 r\n",
                                                "qrels": "q1 g s d1 1\n", **extra})
    assert resp.status_code == 422, resp.get_data()
    assert field in resp.get_json()["errors"], resp.get_json()


def test_library_refuses_what_the_api_refuses():
    with pytest.raises(cranfield.EvaluationError) as caught:
        cranfield.evaluate("q1 g s d1 1\n", "q1 Q0 d1 1 1.0 r\n", qrels_format="prefs",
                           aggregation="micro")
    assert caught.value.field == "options.aggregation"


@pytest.mark.parametrize("accept", ["text/csv", "text/html"])
def test_csv_and_html_are_not_acceptable(client, accept):
    resp = client.post("/v1/evaluations", json=body("prefs"), headers={"Accept": accept})
    assert resp.status_code == 406, resp.get_data()


def test_work_over_the_budget_is_refused_before_work():
    app = create_app({"TESTING": True, "MAX_EVALUATION_VALUES": 100})
    client = ContractClient(app.test_client())
    # 20 judged documents in one topic: 400 document pairs, over 100
    prefs = "".join(f"q1 g s d{i} {i % 3}\n" for i in range(20))
    run = "".join(f"q1 Q0 d{i} {i} {100 - i} r\n" for i in range(20))
    resp = client.post("/v1/evaluations", json={"run": run, "qrels": prefs,
                                                "options": {"qrels_format": "prefs"}})
    assert resp.status_code == 422, resp.get_data()
    problem = resp.get_json()
    assert problem["budget"] == {"name": "MAX_EVALUATION_VALUES", "limit": 100, "total": 400,
                                 "factors": {"document_pairs": 400}}
    assert "qrels" in problem["errors"]


@pytest.mark.parametrize("fmt", ["prefs", "qrels_jg"])
def test_queued_equals_synchronous(client, fmt):
    sync = client.post("/v1/evaluations", json=body(fmt)).get_json()
    resp = client.post("/v1/evaluations", json=body(fmt, qrels=as_mapping(fmt)),
                       headers=ASYNC)
    assert resp.status_code == 202, resp.get_data()
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished", job
    assert without_digest(job["result"]) == without_digest(sync)
    text = client.get(resp.headers["Location"], headers=TEXT)
    assert text.status_code == 200
    assert text.get_data() == (TE / CASES[fmt][3]).read_bytes()
    assert client.get(resp.headers["Location"],
                      headers={"Accept": "text/csv"}).status_code == 406


def put_text(client, qrels_id: str, text: str, fmt: str | None):
    query = f"?qrels_format={fmt}" if fmt else ""
    return client.put(f"/v1/qrels/{qrels_id}{query}", data=text,
                      content_type="text/plain")


def test_stored_kind_round_trip(client, capsys):
    text = (TE / "qrels.test").read_text()
    plain = put_text(client, "plain", text, None)
    kind = put_text(client, "asprefs", text, "qrels_prefs")
    assert plain.status_code == kind.status_code == 201, kind.get_data()
    assert plain.get_json()["qrels_format"] == "qrels"
    meta = kind.get_json()
    assert meta["qrels_format"] == "qrels_prefs"
    # the same lines stored as another kind: another canonical text, another digest
    assert meta["sha256"] != plain.get_json()["sha256"]
    assert meta["judgments"] == len(lines(TE / "qrels.test"))
    assert client.get("/v1/qrels/asprefs").get_json()["qrels_format"] == "qrels_prefs"
    listed = {m["id"]: m["qrels_format"] for m in client.get("/v1/qrels").get_json()["items"]}
    assert listed == {"plain": "qrels", "asprefs": "qrels_prefs"}
    # its JSON shape is the same version (one canonical form of the kind)
    again = client.put("/v1/qrels/asprefs", json={"qrels": as_mapping("qrels_prefs"),
                                                  "qrels_format": "qrels_prefs"})
    assert again.status_code == 200 and again.get_json()["version"] == meta["version"]
    # evaluated as its kind, with no qrels_format given
    resp = client.post("/v1/evaluations", headers=TEXT, json={
        "run": (TE / "results.test").read_text(), "qrels_id": "asprefs",
        "measures": ["all_prefs"], "per_topic": True,
        "options": {"profile": "trec_eval-10"}})
    assert resp.status_code == 200, resp.get_data()
    assert resp.get_data(as_text=True) == cli_text(capsys, "qrels_prefs")
    doc = client.post("/v1/evaluations", json={
        "run": (TE / "results.test").read_text(), "qrels_id": f"asprefs@{meta['version']}",
        "measures": ["prefs_simp"]}).get_json()
    assert doc["provenance"]["qrels_sha256"] == meta["sha256"]
    assert doc["provenance"]["qrels_version"] == f"asprefs@{meta['version']}"
    assert doc["provenance"]["options"]["qrels_format"] == "qrels_prefs"


def test_stored_kind_queued(client):
    put_text(client, "jg", (TE / "qrels.123").read_text(), "qrels_jg")
    resp = client.post("/v1/evaluations", headers=ASYNC, json={
        "run": (TE / "results.test").read_text(), "qrels_id": "jg", "measures": ["qrels_jg"],
        "per_topic": True, "options": {"profile": "trec_eval-10"}})
    assert resp.status_code == 202, resp.get_data()
    assert finished_job(client, resp.headers["Location"])["status"] == "finished"
    text = client.get(resp.headers["Location"], headers=TEXT)
    assert text.get_data() == (TE / "out.test.qrels_jg").read_bytes()


def test_conflicting_format_for_a_stored_kind_is_422(client):
    put_text(client, "prefs", (TE / "prefs.test").read_text(), "prefs")
    # the stored canonical text (levels such as 5.5 included) evaluates as the file does
    same = client.post("/v1/evaluations", headers=TEXT, json={
        "run": (TE / "prefs.results.test").read_text(), "qrels_id": "prefs",
        "per_topic": True, "options": {"qrels_format": "prefs"}})
    assert same.status_code == 200, same.get_data()
    assert same.get_data() == (TE / "out.test.prefs").read_bytes()
    for fmt in ("qrels", "qrels_jg"):
        resp = client.post("/v1/evaluations", json={
            "run": (TE / "prefs.results.test").read_text(), "qrels_id": "prefs",
            "options": {"qrels_format": fmt}})
        assert resp.status_code == 422, resp.get_data()
        assert "options.qrels_format" in resp.get_json()["errors"]


def test_comparisons_and_pools_refuse_a_stored_kind(client):
    put_text(client, "prefs", (TE / "prefs.test").read_text(), "prefs")
    run = (TE / "prefs.results.test").read_text()
    pool = client.post("/v1/pools", json={"runs": [{"name": "a", "run": run}],
                                          "depth": 5, "qrels_id": "prefs"})
    compared = client.post("/v1/comparisons", json={
        "runs": [{"name": "a", "run": run}, {"name": "b", "run": run}], "qrels_id": "prefs"})
    for resp in (pool, compared):
        assert resp.status_code == 422, resp.get_data()
        assert "qrels_id" in resp.get_json()["errors"]


@pytest.mark.parametrize("put, field", [
    ({"data": "q1 g d1 1\n", "query": "?qrels_format=bogus"}, "qrels_format"),
    ({"json": {"qrels": "q1 g d1 1\n", "qrels_format": "prefs"}}, "qrels line 1"),
    ({"json": {"qrels": "q1 0 d1 1\n", "qrels_format": "qrels_jg", "diversity": True}},
     "diversity"),
    ({"json": {"qrels": "q1 0 d1 1\n"}, "query": "?qrels_format=qrels_jg"}, "qrels_format"),
])
def test_bad_stored_kinds_are_refused_naming_the_field(client, put, field):
    if "json" in put:
        resp = client.put(f"/v1/qrels/x{put.get('query', '')}", json=put["json"])
    else:
        resp = client.put(f"/v1/qrels/x{put['query']}", data=put["data"],
                          content_type="text/plain")
    assert resp.status_code in (400, 422), resp.get_data()
    assert field in resp.get_json()["errors"], resp.get_json()


@pytest.mark.parametrize("options, field", [
    ({"qrels_format": "prefs", "aggregation": "micro"}, "options.aggregation"),
    ({"qrels_format": "qrels_prefs", "relevance_level": 3}, "options.relevance_level"),
])
def test_a_queued_request_is_refused_before_it_is_queued(client, options, field):
    resp = client.post("/v1/evaluations", headers=ASYNC, json={
        "run": "q1 Q0 d1 1 1.0 r\n", "qrels": "q1 g s d1 1\n", "options": options})
    assert resp.status_code == 422, resp.get_data()
    assert field in resp.get_json()["errors"]


@pytest.mark.parametrize("fmt, shape, text, measure, value", [
    ("qrels_jg", {"q1": {"g": {"d\u00a01": 1, "d2": 0}}}, "q1 g d\u00a01 1\nq1 g d2 0\n",
     "map_avgjg", 1.0),
    ("prefs", {"q1": {"g": {"s": {"d\u20281": 1, "d2": 0}}}},
     "q1 g s d\u20281 1\nq1 g s d2 0\n", "prefs_num_prefs_ful", 1),
])
def test_unicode_ids_read_alike_inline_as_json_as_text_and_stored(client, fmt, shape, text,
                                                                  measure, value):
    """Review R1 F3: an id holding U+00A0 or U+2028 is one id in the JSON shape, the text
    and a stored version (whose canonical text the text reader reads back)."""
    run = "q1 Q0 d\u00a01 1 3.0 r\nq1 Q0 d\u20281 2 2.0 r\nq1 Q0 d2 3 1.0 r\n"
    put = client.put("/v1/qrels/uni", json={"qrels": shape, "qrels_format": fmt})
    assert put.status_code == 201, put.get_data()
    answers = []
    for judged in ({"qrels": shape}, {"qrels": text}, {"qrels_id": "uni"}):
        options = {} if "qrels_id" in judged else {"qrels_format": fmt}
        resp = client.post("/v1/evaluations", json={"run": run, "measures": [measure],
                                                    "options": options, **judged})
        assert resp.status_code == 200, resp.get_data()
        answers.append(resp.get_json()["aggregate"][measure])
    assert answers == [value] * 3


@pytest.mark.parametrize("qrels, where, reason", [
    ("q1 g d1 1_0\n", "qrels line 1", "not a plain decimal integer"),
    ("q1 g d1 100000000000000000000000000000\n", "qrels line 1",
     "outside the 64-bit integer range"),
    ("q1 g d\x011 1\n", "qrels line 1", "control character U+0001"),
])
def test_text_outside_the_grammar_is_refused_inline_and_at_put(client, qrels, where, reason):
    resp = client.post("/v1/evaluations", json={"run": "q1 Q0 d1 1 1.0 r\n", "qrels": qrels,
                                                "options": {"qrels_format": "qrels_jg"}})
    assert resp.status_code == 422, resp.get_data()
    said = [m for ms in resp.get_json()["errors"].values() for m in ms]
    assert any(reason in m for m in said), said
    put = client.put("/v1/qrels/bad?qrels_format=qrels_jg", data=qrels.encode(),
                     content_type="text/plain")
    assert put.status_code == 422 and reason in put.get_data(as_text=True)


@pytest.mark.parametrize("part, content", [("qrels_format", b"qrels_jg"),
                                           ("diversity", b"true")])
def test_multipart_put_refuses_a_word_sent_as_a_file_part(client, part, content):
    """Review R1 F7: a qrels_format (or diversity) file part was ignored, the judgment groups
    stored as plain qrels; it is refused naming it, and nothing is stored."""
    resp = client.put("/v1/qrels/m1", data={
        "qrels": (io.BytesIO(b"q1 g d1 1\nq1 h d2 1\n"), "q.txt"),
        part: (io.BytesIO(content), "f.txt")}, content_type="multipart/form-data")
    assert resp.status_code == 422, resp.get_data()
    assert resp.get_json()["errors"] == {part: ["send it as a form field, not a file"]}
    assert client.get("/v1/qrels/m1").status_code == 404
    # the same word as a form field is read
    resp = client.put("/v1/qrels/m1", data={
        "qrels": (io.BytesIO(b"q1 g d1 1\nq1 h d2 1\n"), "q.txt"), "qrels_format": "qrels_jg"},
        content_type="multipart/form-data")
    assert resp.status_code == 201 and resp.get_json()["qrels_format"] == "qrels_jg"


@pytest.mark.parametrize("fmt", ["qrels_jg", "prefs"])
def test_document_measures_are_the_registrys(client, fmt):
    """Review R1 F11: each measures[] entry names its registry measure, canonical and family
    as GET /v1/measures and `cranfield measures` do (P_avgjg_5 is P_avgjg(k=5,...))."""
    doc = client.post("/v1/evaluations", json=body(fmt)).get_json()
    listed = {m["name"]: m for m in client.get("/v1/measures").get_json()["measures"]}
    from cranfield.measures.names import resolve

    for m in doc["measures"]:
        if m["key"] in ("runid", "num_q"):
            continue
        assert m["measure"] in listed, m
        assert m["family"] == listed[m["measure"]]["family"]
        (inst,) = [i for i in resolve([m["key"]], "trec_eval-10", fmt) if i.key == m["key"]]
        assert m["canonical"] == inst.canonical("trec_eval-10", 1)
    by_key = {m["key"]: m for m in doc["measures"]}
    if fmt == "qrels_jg":
        assert by_key["P_avgjg_5"]["measure"] == "P_avgjg"
        assert by_key["P_avgjg_5"]["canonical"] == "P_avgjg(k=5,rel=1,profile=trec_eval-10)"


@pytest.mark.parametrize("fmt, extra", [
    ("qrels_jg", ["--format", "json"]), ("qrels_jg", ["--format", "jsonl"]),
    ("qrels_jg", ["--format", "csv"]), ("prefs", ["--format", "jsonl"]),
    ("prefs", ["-Z", "z.txt"]), ("qrels_jg", ["--curves"]),
])
def test_cli_server_refuses_what_the_local_command_refuses(served, capsys, fmt, extra):
    """Review R1 F9: `cranfield eval --server -R` refuses, before sending, what the local
    command refuses, with the same message and exit status (no traceback)."""
    qrels_file, run_file, nickname, _ = CASES[fmt]
    args = ["-R", fmt, *extra, "-m", nickname, "-q", str(TE / qrels_file), str(TE / run_file)]
    assert main(["eval", *args]) == 2
    local = capsys.readouterr().err
    assert local.startswith(f"cranfield: -R {fmt} does not take ")
    assert main(["eval", "--server", served, *args]) == 2
    assert capsys.readouterr().err == local



@pytest.mark.parametrize("fmt", ["qrels_jg", "prefs"])
def test_html_is_refused_queued_as_synchronously(client, fmt):
    """Review R1 F13: the page of a queued jg/prefs evaluation is refused (406) as the
    synchronous request with Accept: text/html is; JSON and text stay served."""
    html = {"Accept": "text/html"}
    sync = client.post("/v1/evaluations", json=body(fmt), headers=html)
    assert sync.status_code == 406
    resp = client.post("/v1/evaluations", json=body(fmt), headers=ASYNC)
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished", job
    for url in (resp.headers["Location"], resp.headers["Location"] + "/report"):
        page = client.get(url, headers=html)
        assert page.status_code == 406, (url, page.get_data())
        assert page.get_json()["detail"] == (
            "an evaluation against judgment groups or preferences is available as "
            "application/json or text/plain")
    assert client.get(resp.headers["Location"], headers=TEXT).get_data() == \
        (TE / CASES[fmt][3]).read_bytes()


@pytest.mark.parametrize("fmt, text", [
    ("qrels_jg", "q1 g d1 1\n# a comment\nq1 h d2 1\n"),
    ("prefs", "q1 g s d1 1\n# a comment\nq1 g s d2 0\n"),
])
def test_put_refuses_comment_lines_as_9_0_8_does_inline(client, fmt, text):
    """Review R1 F6: the same text is not refused inline (9.0.8) and accepted when stored:
    PUT refuses it naming the line; nothing is stored."""
    run = "q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\n"
    inline = client.post("/v1/evaluations", json={
        "run": run, "qrels": text, "options": {"qrels_format": fmt,
                                               "profile": "trec_eval-9.0.8"}})
    assert inline.status_code == 422 and "qrels line 2" in inline.get_json()["errors"]
    put = client.put(f"/v1/qrels/c1?qrels_format={fmt}", data=text.encode(),
                     content_type="text/plain")
    assert put.status_code == 422, put.get_data()
    assert list(put.get_json()["errors"]) == ["qrels line 2"]
    assert "keeps no comment lines" in put.get_json()["detail"]
    assert client.get("/v1/qrels/c1").status_code == 404


@pytest.mark.parametrize("fmt, field, json_measures, keys", [
    ("qrels_jg", "P_avgjg.5,10", ["P_avgjg.5,10"], ["P_avgjg_5", "P_avgjg_10"]),
    ("qrels_jg", "Rprec_mult_avgjg.0.5,0.25,map_avgjg", ["Rprec_mult_avgjg.0.5,0.25",
                                                         "map_avgjg"],
     ["map_avgjg", "Rprec_mult_avgjg_0.25", "Rprec_mult_avgjg_0.50"]),
    ("qrels", "P.5,10,map", ["P.5,10", "map"], ["map", "P_5", "P_10"]),
])
def test_multipart_measures_keep_parameter_lists(client, fmt, field, json_measures, keys):
    """Review R1 F12: a multipart `measures` field is split where the JSON list would be,
    not inside a parameter list; the answer equals the JSON body's."""
    qrels_file = CASES["qrels_jg"][0] if fmt == "qrels_jg" else "qrels.test"
    run, qrels = (TE / "results.test").read_bytes(), (TE / qrels_file).read_bytes()
    form = {"run": (io.BytesIO(run), "run.txt"), "qrels": (io.BytesIO(qrels), "q.txt"),
            "measures": field}
    if fmt != "qrels":
        form["qrels_format"] = fmt
    resp = client.post("/v1/evaluations", data=form, content_type="multipart/form-data")
    assert resp.status_code == 200, resp.get_data()
    doc = resp.get_json()
    got = [m["key"] for m in doc["measures"] if m["key"] not in ("runid", "num_q")]
    assert sorted(got) == sorted(keys)
    json_body = {"run": run.decode(), "qrels": qrels.decode(), "measures": json_measures}
    if fmt != "qrels":
        json_body["options"] = {"qrels_format": fmt}
    answer = client.post("/v1/evaluations", json=json_body)
    assert answer.status_code == 200, answer.get_data()
    assert answer.get_json()["aggregate"] == doc["aggregate"]
