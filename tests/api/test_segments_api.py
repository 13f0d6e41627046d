"""POST /v1/evaluations and /v1/comparisons with ``options.topic_metadata`` inline (issue #28,
segments and weights): the JSON mapping or its text, and a multipart ``topic_metadata`` part,
give the library's segments and weighted means (JSON), the CLI's lines (text/plain),
synchronous and queued alike; malformed metadata is a 422 naming its path or line. Every
response is checked against openapi.yaml (ContractClient)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import finished_job

import cranfield
import cranfield.inputs.segments
from cranfield.cli import main
from cranfield.compare.comparison import compare

TE = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
ASYNC = {"Prefer": "respond-async"}
META = {"301": {"segments": ["tail", "de"], "weight": 2}, "302": {"segments": ["tail"]},
        "303": {"weight": 0.5}}
META_TEXT = "301 tail,de 2\n302 tail\n303 - 0.5\n"
MEASURES = ["map", "P.5", "num_ret", "num_q"]


def body(metadata=META, **extra) -> dict:
    return {"run": (TE / "results.test").read_text(), "qrels": (TE / "qrels.test").read_text(),
            "measures": MEASURES, "options": {"topic_metadata": metadata}, **extra}


def library():
    return cranfield.evaluate(TE / "qrels.test", TE / "results.test", MEASURES,
                              topic_metadata=META)


def test_json_answer_has_the_library_segments_and_weighted(client):
    resp = client.post("/v1/evaluations", json=body())
    assert resp.status_code == 200, resp.get_data()
    doc = resp.get_json()
    ev = library()
    assert doc["segments"] == ev.segments
    assert doc["weighted"] == ev.weighted
    # by hand: tail = 301 and 302 (AP .0324 and .4175), weights 2, 1, .5
    assert doc["segments"]["tail"]["topics"] == 2
    assert doc["segments"]["tail"]["aggregate"]["map"] == pytest.approx(
        (0.03242534480374725 + 0.4174542400168801) / 2)
    assert doc["weighted"]["num_q"] == 3.5
    assert doc["weighted"]["num_ret"] == 1750.0  # 500 each, weighted 2 + 1 + .5
    meta = doc["provenance"]["options"]["topic_metadata"]
    assert meta == ev.options["topic_metadata"] and meta["topics"] == 3


def test_text_is_what_the_cli_prints(client, capsys, tmp_path):
    f = tmp_path / "meta.txt"
    f.write_text(META_TEXT)
    assert main(["eval", *(a for m in MEASURES for a in ("-m", m)), "--topic-metadata", str(f),
                 str(TE / "qrels.test"), str(TE / "results.test")]) == 0
    cli = capsys.readouterr().out
    assert "map                   \tsegment=tail\t0.2249\n" in cli
    for metadata in (META, META_TEXT):  # the mapping and its text: one answer
        resp = client.post("/v1/evaluations", json=body(metadata),
                           headers={"Accept": "text/plain"})
        assert resp.status_code == 200, resp.get_data()
        assert resp.get_data(as_text=True) == cli


def test_multipart_part_is_the_same_metadata(client):
    for part in ((META_TEXT.encode(), "meta.txt"), META_TEXT):  # a file, a field
        form = {"run": ((TE / "results.test").open("rb"), "results.test"),
                "qrels": ((TE / "qrels.test").open("rb"), "qrels.test"),
                "measures": ",".join(MEASURES), "topic_metadata": part}
        if isinstance(part, tuple):
            import io

            form["topic_metadata"] = (io.BytesIO(part[0]), part[1])
        resp = client.post("/v1/evaluations", data=form, content_type="multipart/form-data")
        assert resp.status_code == 200, resp.get_data()
        doc = resp.get_json()
        assert doc["segments"] == library().segments
        assert doc["weighted"] == library().weighted


def test_queued_job_gives_the_same_answer(client):
    sync = client.post("/v1/evaluations", json=body(), headers={"Accept": "text/plain"})
    queued = client.post("/v1/evaluations", json=body(), headers={"Accept": "text/plain",
                                                                  **ASYNC})
    assert queued.status_code == 202, queued.get_data()
    job = finished_job(client, queued.headers["Location"])
    assert job["status"] == "finished", job
    text = client.get(queued.headers["Location"], headers={"Accept": "text/plain"})
    assert text.get_data() == sync.get_data()
    assert b"\tsegment=tail\t" in sync.get_data() and b"\tweighted\t" in sync.get_data()
    doc = client.get(queued.headers["Location"]).get_json()
    assert doc["result"]["segments"] == library().segments
    assert doc["result"]["weighted"] == library().weighted


def test_without_metadata_the_answer_is_as_before(client):
    b = body()
    del b["options"]["topic_metadata"]
    doc = client.post("/v1/evaluations", json=b).get_json()
    assert "segments" not in doc and "weighted" not in doc
    assert "topic_metadata" not in doc["provenance"]["options"]
    b["options"]["topic_metadata"] = None  # null: the same
    assert client.post("/v1/evaluations", json=b).get_json()["aggregate"] == doc["aggregate"]


@pytest.mark.parametrize("metadata, where, words", [
    ({"301": {"weight": -1}}, "options.topic_metadata.301.weight", "must be >= 0"),
    ({"301": {"segments": ["a b"]}}, "options.topic_metadata.301.segments", "space"),
    ({"301": {"segments": "tail"}}, "options.topic_metadata.301.segments", "a list"),
    ({"301": {"labels": []}}, "options.topic_metadata.301.labels", "unknown member"),
    ({"301": []}, "options.topic_metadata.301", "must be an object"),
    ({}, "options.topic_metadata", "holds no topics"),
    ("301 tail\n301 head\n", "options.topic_metadata", "line 2: topic '301' is given twice"),
    ("301 tail 1 2\n", "options.topic_metadata", "line 1: has 4 fields"),
    (5, "options.topic_metadata", "must be an object"),
])
def test_malformed_metadata_is_refused_naming_the_path(client, metadata, where, words):
    resp = client.post("/v1/evaluations", json=body(metadata))
    assert resp.status_code == 422, resp.get_data()
    errors = resp.get_json()["errors"]
    assert where in errors, errors
    assert any(words in e for e in errors[where]), errors


def test_micro_with_metadata_is_refused(client):
    b = body()
    b["options"]["aggregation"] = "micro"
    resp = client.post("/v1/evaluations", json=b)
    assert resp.status_code == 422
    assert "options.topic_metadata" in resp.get_json()["errors"]


def test_more_topics_than_max_topics_are_refused(app, client):
    app.config["MAX_TOPICS"] = 2
    resp = client.post("/v1/evaluations", json=body())
    assert resp.status_code == 413, resp.get_data()
    assert "over the limit of 2 topics" in str(resp.get_json()["errors"])


def test_max_topics_counts_topics_in_either_form_inline_and_stored(app, client):
    """Review R2 F8: text was held to its lines + 1 (1,000 topics refused as text, accepted
    as JSON; comment lines counted), and inline was 422 where stored was 413. Now topics are
    counted (exactly MAX_TOPICS pass, one more fails) and over the limit is 413 both ways,
    as qrels over MAX_TOPICS are."""
    app.config["MAX_TOPICS"] = 4
    for n, status in ((4, (200, 201)), (5, (413, 413))):
        text = "# topic labels\n\n" * 3 + "".join(f"t{i} a\n" for i in range(n))
        mapping = {f"t{i}": {"segments": ["a"]} for i in range(n)}
        for metadata in (text, mapping):
            resp = client.post("/v1/evaluations", json=body(metadata))
            assert resp.status_code == status[0], (n, metadata, resp.get_data())
            put = client.put(f"/v1/topic-metadata/m{n}", json={"topic_metadata": metadata})
            assert put.status_code in (status[1], 200), (n, metadata, put.get_data())
            if status[0] == 413:
                assert put.status_code == 413
                for r in (resp, put):
                    assert "over the limit of 4 topics" in str(r.get_json()["errors"])
        put = client.put(f"/v1/topic-metadata/t{n}", data=text.encode(),
                         content_type="text/plain")
        assert put.status_code == status[1], put.get_data()


# ---------------------------------------------------------------------------------------------
# comparisons
# ---------------------------------------------------------------------------------------------

def comparison(metadata=META, **extra) -> dict:
    run = (TE / "results.test").read_text()
    # b: 301's ranking reversed (its scores negated), the other topics as a's
    other = "".join(_negated(line) if line.split()[0] == "301" else line
                    for line in run.splitlines(True))
    return {"runs": [{"name": "a", "run": run}, {"name": "b", "run": other}],
            "qrels": (TE / "qrels.test").read_text(), "measures": ["map", "P.5"],
            "tests": ["t", "randomization"], "baseline": "a",
            "options": {"topic_metadata": metadata}, **extra}


def _negated(line: str) -> str:
    fields = line.split()
    fields[4] = str(-float(fields[4]))
    return " ".join(fields) + "\n"


def library_comparison():
    b = comparison()
    return compare(b["qrels"], {r["name"]: r["run"] for r in b["runs"]}, b["measures"],
                   baseline="a", tests=("t", "randomization"), topic_metadata=META)


def test_comparison_has_the_library_segments(client):
    resp = client.post("/v1/comparisons", json=comparison())
    assert resp.status_code == 200, resp.get_data()
    doc = resp.get_json()
    lib = library_comparison()
    assert doc["segments"] == lib["segments"] and doc["weighted"] == lib["weighted"]
    tail = doc["segments"]["tail"]
    assert tail["topics"] == ["301", "302"]
    assert tail["family"] == {"segment": "tail", "tests": 2, "correction": "holm"}
    assert doc["options"]["topic_metadata"]["topics"] == 3
    p_map = next(p for p in tail["pairs"] if p["measure"] == "map")
    assert p_map["mean_diff"] < 0 and (p_map["wins"], p_map["ties"], p_map["losses"]) == (0, 1, 1)
    text = client.post("/v1/comparisons", json=comparison(),
                       headers={"Accept": "text/plain"}).get_data(as_text=True)
    assert "segment tail: 2 topics; p-values adjusted by holm over this segment's family" in text


def test_comparison_queued_and_multipart_agree(client):
    sync = client.post("/v1/comparisons", json=comparison()).get_json()
    queued = client.post("/v1/comparisons", json=comparison(), headers=ASYNC)
    assert queued.status_code == 202, queued.get_data()
    job = finished_job(client, queued.headers["Location"])
    assert job["status"] == "finished", job
    assert job["result"]["segments"] == sync["segments"]
    import io

    b = comparison()
    form = {"runs": [(io.BytesIO(r["run"].encode()), f"{r['name']}.txt") for r in b["runs"]],
            "qrels": (io.BytesIO(b["qrels"].encode()), "qrels.txt"), "measures": "map,P.5",
            "tests": "t,randomization", "baseline": "a",
            "topic_metadata": (io.BytesIO(META_TEXT.encode()), "meta.txt")}
    resp = client.post("/v1/comparisons", data=form, content_type="multipart/form-data")
    assert resp.status_code == 200, resp.get_data()
    assert resp.get_json()["segments"] == sync["segments"]


def test_comparison_metadata_refused_naming_the_path(client):
    resp = client.post("/v1/comparisons", json=comparison({"301": {"weight": "x"}}))
    assert resp.status_code == 422, resp.get_data()
    assert "options.topic_metadata.301.weight" in resp.get_json()["errors"]


# ---------------------------------------------------------------------------------------------
# cranfield eval --server and the Python client: the same metadata, the same answer
# ---------------------------------------------------------------------------------------------

def test_cli_on_the_service_prints_what_it_prints_locally(served, capsys, tmp_path):
    f = tmp_path / "meta.txt"
    f.write_text(META_TEXT)
    args = [*(a for m in MEASURES for a in ("-m", m)), "--topic-metadata", str(f),
            str(TE / "qrels.test"), str(TE / "results.test")]
    assert main(["eval", *args]) == 0
    local = capsys.readouterr().out
    assert main(["eval", "--server", served, *args]) == 0
    assert capsys.readouterr().out == local
    f.write_text("301 tail 1 2\n")  # refused here, naming the line, before anything is sent
    assert main(["eval", "--server", served, *args]) == 2
    assert f"{f}:1: has 4 fields" in capsys.readouterr().err


def test_client_sends_metadata_in_either_body(served):
    from cranfield.client import Client

    client = Client(served)
    ev = library()
    for qrels, run in ((TE / "qrels.test", TE / "results.test"),  # paths: multipart
                       ((TE / "qrels.test").read_text(), (TE / "results.test").read_text())):
        for metadata in (META, META_TEXT, cranfield.inputs.segments.read_topic_metadata(META)):
            doc = client.evaluate(qrels, run, MEASURES, options={"topic_metadata": metadata})
            assert doc["segments"] == ev.segments and doc["weighted"] == ev.weighted


def test_comparison_work_budget_counts_the_segments(app, client):
    """The whole comparison fits MAX_COMPARISON_WORK; with its segments' comparisons it does
    not: 422 before any test runs, the figures counting every segment."""
    from cranfield.compare.comparison_work import comparison_work

    tests = ("t", "randomization")
    whole = comparison_work(1, 2, 3, tests, 10_000, 10_000)
    with_segments = comparison_work(1, 2, 3, tests, 10_000, 10_000, [1, 2])  # de, tail
    app.config["MAX_COMPARISON_WORK"] = whole.total
    b = comparison()
    del b["options"]["topic_metadata"]
    assert client.post("/v1/comparisons", json=b).status_code == 200
    resp = client.post("/v1/comparisons", json=comparison())
    assert resp.status_code == 422, resp.get_data()
    problem = resp.get_json()
    assert problem["work"]["total"] == with_segments.total > whole.total
    assert "2 segment(s) compared as well" in problem["work"]["formula"]


def test_many_labels_are_refused_before_any_work(app, client):
    """Review R2 F2: 10 topics x 5,000 labels each (a 0.5 MB body) held 140 s of a worker;
    now MAX_SEGMENTS (default 1,000) refuses it while the metadata is read, naming it. A
    stored metadata over a lowered MAX_SEGMENTS is refused by the evaluation's budget."""
    assert app.config["MAX_SEGMENTS"] == 1000
    many = {t: {"segments": [f"L{t}_{j}" for j in range(5000)]} for t in ("301", "302")}
    for where in ("options", "comparison"):
        if where == "options":
            resp = client.post("/v1/evaluations", json=body(many))
        else:
            resp = client.post("/v1/comparisons", json=comparison(many))
        assert resp.status_code == 413, resp.get_data()  # over a size limit: as MAX_TOPICS
        errors = resp.get_json()["errors"]
        assert any("more than 1,000 distinct segment labels" in e
                   for e in errors["options.topic_metadata.301.segments"]), errors
    app.config["MAX_SEGMENTS"] = 2
    resp = client.post("/v1/evaluations", json=body())  # tail and de: within
    assert resp.status_code == 200, resp.get_data()
    three = {**META, "303": {"segments": ["head"]}}
    resp = client.put("/v1/topic-metadata/three", json={"topic_metadata": three})
    assert resp.status_code == 413, resp.get_data()
    app.config["MAX_SEGMENTS"] = 3
    assert client.put("/v1/topic-metadata/three",
                      json={"topic_metadata": three}).status_code == 201
    app.config["MAX_SEGMENTS"] = 2  # lowered since it was stored: the budget refuses it
    b = body(None, topic_metadata_id="three")
    del b["options"]["topic_metadata"]
    resp = client.post("/v1/evaluations", json=b)
    assert resp.status_code == 422, resp.get_data()
    problem = resp.get_json()
    assert problem["budget"]["name"] == "MAX_SEGMENTS" and problem["budget"]["total"] == 3
    assert "Prefer: respond-async" not in problem["detail"]
    b = comparison(None, topic_metadata_id="three")
    del b["options"]["topic_metadata"]
    resp = client.post("/v1/comparisons", json=b)
    assert resp.status_code == 422, resp.get_data()
    assert "over MAX_SEGMENTS 2" in resp.get_json()["detail"]


@pytest.mark.parametrize("route", ["/v1/evaluations", "/v1/comparisons"])
@pytest.mark.parametrize("others", [{}, {"topic_metadata": "file"},
                                    {"topic_metadata": "301 a\n"}, {"judged_only": "true"}],
                         ids=["alone", "metadata-file", "metadata-field", "option-field"])
def test_form_options_field_is_refused_whatever_else_is_sent(client, route, others):
    """Review R2 F9: a multipart ``options`` field was refused alone but silently dropped
    (complete_topics, depth, its topic_metadata lost: a 200) beside an option field or a
    topic_metadata part. Now the same 422 naming it, whatever else the form holds."""
    import io

    run, qrels = (TE / "results.test").read_bytes(), (TE / "qrels.test").read_bytes()
    if route == "/v1/evaluations":
        form = {"run": (io.BytesIO(run), "results.test"), "measures": "num_q,map"}
    else:
        form = {"runs": [(io.BytesIO(run), "a.txt"), (io.BytesIO(run), "b.txt")],
                "measures": "map"}
    form["qrels"] = (io.BytesIO(qrels), "qrels.test")
    form["options"] = '{"complete_topics": true, "depth": 3, "topic_metadata": "302 b\\n"}'
    for key, value in others.items():
        form[key] = (io.BytesIO(b"301 a\n"), "meta.txt") if value == "file" else value
    resp = client.post(route, data=form, content_type="multipart/form-data")
    assert resp.status_code == 422, resp.get_data()
    errors = resp.get_json()["errors"]
    assert list(errors) == ["options"], errors
    assert "a field of its own" in errors["options"][0]


@pytest.mark.parametrize("metadata, where", [
    ({"301": {"weight": 1e308}, "302": {"weight": 1e308}}, "options.topic_metadata.301.weight"),
    ("301 tail 1e308\n302 tail 1e308\n", "options.topic_metadata"),
])
def test_weights_over_the_limit_are_refused(client, metadata, where):
    """Review R2 F1: two weights of 1e308 overflowed the weighted sums (map's weighted mean
    answered 0.0, num_q null); weights are held to WEIGHT_LIMIT (1e100)."""
    resp = client.post("/v1/evaluations", json=body(metadata))
    assert resp.status_code == 422, resp.get_data()
    errors = resp.get_json()["errors"]
    said = errors[where][0]
    assert "at most 1e+100" in said and ("line 1" in said or where.endswith("301.weight"))
    resp = client.post("/v1/comparisons", json=comparison(metadata))
    assert resp.status_code == 422 and where in resp.get_json()["errors"]


def test_minus_zero_weight_is_the_same_version(client):
    """Review R2 F4: weight -0 and 0 were two versions of one content."""
    first = client.put("/v1/topic-metadata/z", json={"topic_metadata": "1 a 0\n"})
    again = client.put("/v1/topic-metadata/z", json={"topic_metadata": "1 a -0\n"})
    assert first.status_code == 201 and again.status_code == 200, again.get_data()
    assert again.get_json()["version"] == first.get_json()["version"]
    evs = [client.post("/v1/evaluations", json=body(m)).get_json()
           for m in ({"301": {"weight": 0}}, {"301": {"weight": -0.0}}, "301 - -0\n")]
    assert len({ev["provenance"]["options"]["topic_metadata"]["sha256"] for ev in evs}) == 1


def test_byte_order_mark_is_refused_as_in_qrels(client, tmp_path):
    """Review R2 F3: a leading BOM was read into the first topic ("\\ufeff301": its labels
    and weight lost, a 200); now refused as qrels and runs refuse it, naming the input."""
    qrels = client.post("/v1/evaluations", json={**body(None), "qrels": "\ufeff" + body(
        None)["qrels"]})
    bom = "line 1 starts with a UTF-8 byte-order mark (EF BB BF)"
    assert qrels.status_code == 422 and bom in str(qrels.get_json()["errors"])
    resp = client.post("/v1/evaluations", json=body("\ufeff" + META_TEXT))
    assert resp.status_code == 422, resp.get_data()
    assert any(bom in e for e in resp.get_json()["errors"]["options.topic_metadata"])
    put = client.put("/v1/topic-metadata/bom", data=("\ufeff" + META_TEXT).encode(),
                     content_type="text/plain")
    assert put.status_code == 422 and bom in str(put.get_json()["errors"])
    f = tmp_path / "meta.txt"
    f.write_bytes(b"\xef\xbb\xbf" + META_TEXT.encode())
    assert main(["eval", "-m", "map", "--topic-metadata", str(f), str(TE / "qrels.test"),
                 str(TE / "results.test")]) != 0


@pytest.mark.parametrize("metadata, where, words", [
    ({"301": {"segments": ["a\u0085b"]}}, "options.topic_metadata.301.segments", "U+0085"),
    ({"301": {"segments": ["a\u2028b"]}}, "options.topic_metadata.301.segments", "U+2028"),
    ("301 a\u2028b\n", "options.topic_metadata", "line 1: a segment label may not contain"),
    ({"301": {"segments": ["x" * 300]}}, "options.topic_metadata.301.segments",
     "a segment label of 300 characters; at most 200"),
    ({"#301": {"segments": ["a"]}}, "options.topic_metadata.#301", "starts with '#'"),
])
def test_labels_and_topics_refused_by_the_engine_rule(client, metadata, where, words):
    """Review R2 F11, F12, F13: the engine's reader holds a label to 200 characters and
    refuses Unicode controls and line separators (a recorded 'a<NEL>b' could never be
    trended), and a mapping topic starting with '#' (its text is a comment); the API says
    the engine's words."""
    resp = client.post("/v1/evaluations", json=body(metadata))
    assert resp.status_code == 422, resp.get_data()
    errors = resp.get_json()["errors"]
    assert any(words in e for e in errors[where]), errors
