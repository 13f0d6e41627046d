"""The command line of issue #31's service features, walked as a user walks it against the app
on a loopback port (``main([...])``, the Python client): ``cranfield qrels put --judges
--pool-depth``; ``cranfield qrels consensus FILE`` here, the same qrels the service's POST
/v1/qrels/{id}/consensus stores (put back, the same version); ``cranfield rescore ...
[--wait]`` (its id, its progress, its items, exit 1 when an item failed) and
``cranfield stability`` (the route's text/plain byte for byte, its JSON, its page), with
Client.stability / rescore / rescore_status. Re-scores run on the embedded queue."""

from __future__ import annotations

import contextlib
import io
import json
import random

import pytest

from cranfield.cli import main
from cranfield.client import ApiError, Client

JUDGED = """\
301 alice d1 2
301 bob d1 1
301 llm d1 2
301 alice d2 0
301 bob d2 0
301 llm d2 1
301 alice d5 1
301 bob d5 1
302 alice d3 1
302 llm d3 1
302 bob d4 0
302 llm d4 2
302 alice d4 0
303 alice d9 3
303 bob d9 2
303 llm d9 2
303 bob d8 1
"""
JUDGES = {"alice": {"kind": "person", "notes": "NIST assessor"},
          "bob": {"kind": "person"},
          "llm": {"kind": "model", "model": "umbrela-gpt-4o", "prompt_digest": "sha256:ab12"}}
PLAIN = "text/plain"


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch):
    monkeypatch.delenv("CRANFIELD_SERVER", raising=False)
    monkeypatch.delenv("CRANFIELD_API_KEY", raising=False)


def cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:  # argparse's refusals
            code = exc.code
    return code, out.getvalue(), err.getvalue()


# -- qrels put --judges --pool-depth -------------------------------------------------------------

def test_put_keeps_each_judges_provenance_and_the_pool_depth(client, served, tmp_path):
    judged, judges = tmp_path / "jg.txt", tmp_path / "judges.json"
    judged.write_text(JUDGED)
    judges.write_text(json.dumps(JUDGES))
    code, out, err = cli("qrels", "put", "rag", judged, "-R", "qrels_jg", "--judges", judges,
                         "--pool-depth", 20, "--format", "json", "--server", served)
    assert (code, err) == (0, ""), err
    meta = json.loads(out)
    stored = client.get("/v1/qrels/rag").get_json()
    assert meta["judges"] == stored["judges"] == JUDGES
    assert meta["pool_depth"] == stored["pool_depth"] == 20
    assert stored["qrels_format"] == "qrels_jg" and stored["judgments"] == 17
    # the same judgments by the client: the same version, the depth recorded over
    again = Client(served).put_qrels("rag", JUDGED, qrels_format="qrels_jg", pool_depth=30)
    assert again["version"] == meta["version"]
    assert client.get("/v1/qrels/rag").get_json()["pool_depth"] == 30

    # plain qrels from a file with a depth (a multipart field: no query parameter for it)
    v1, v2 = tmp_path / "v1.txt", tmp_path / "v2.txt"
    v1.write_text("1 0 a 1\n1 0 b 0\n2 0 c 1\n")
    v2.write_text("1 0 a 1\n1 0 b 2\n2 0 c 1\n2 0 d 1\n")
    code, out, _ = cli("qrels", "put", "adhoc", v1, "--pool-depth", 10, "--server", served)
    first = out.strip()
    assert code == 0 and client.get(f"/v1/qrels/{first}").get_json()["pool_depth"] == 10
    code, out, _ = cli("qrels", "put", "adhoc", v2, "--pool-depth", 20, "--server", served)
    second = out.strip()
    assert code == 0 and second != first
    # qrels diff shows each version's depth, as the route does
    code, out, _ = cli("qrels", "diff", "adhoc", "--format", "json", "--server", served)
    doc = json.loads(out)
    assert code == 0 and (doc["from"]["pool_depth"], doc["to"]["pool_depth"]) == (10, 20)
    assert doc["totals"]["regraded"] == 1 and doc["totals"]["added"] == 1
    # without a depth: none recorded
    Client(served).put_qrels("nodepth", str(v1))
    assert client.get("/v1/qrels/nodepth").get_json().get("pool_depth") is None


def test_put_refusals_are_exit_codes(served, tmp_path):
    judged = tmp_path / "jg.txt"
    judged.write_text(JUDGED)
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    code, _, err = cli("qrels", "put", "rag", judged, "-R", "qrels_jg", "--judges", bad,
                       "--server", served)
    assert code == 2 and "JSON object" in err
    code, _, err = cli("qrels", "put", "rag", judged, "-R", "qrels_jg", "--judges",
                       tmp_path / "missing.json", "--server", served)
    assert code == 2 and "judges file" in err
    code, _, err = cli("qrels", "put", "rag", judged, "--pool-depth", "0", "--server", served)
    assert code == 2 and "positive integer" in err
    # the service's bound (1..10000): its 422 names pool_depth
    code, _, err = cli("qrels", "put", "rag", judged, "-R", "qrels_jg", "--pool-depth", 10001,
                       "--server", served)
    assert code == 2 and "pool_depth" in err
    assert cli("qrels", "list", "--format", "json", "--server", served)[1].count('"id"') == 0


# -- qrels consensus FILE -------------------------------------------------------------------------

@pytest.mark.parametrize("method, extra", [
    ("majority", []), ("max", []), ("mean", []), ("judge", ["--judge", "llm"]),
    ("majority", ["--judges", "alice,bob"]), ("mean", ["--judges", "bob,llm"])])
def test_consensus_of_a_file_is_the_services_consensus(client, served, tmp_path, method,
                                                        extra):
    judged = tmp_path / "jg.txt"
    judged.write_text(JUDGED)
    api = Client(served)
    source = api.put_qrels("rag", JUDGED, qrels_format="qrels_jg", judges=JUDGES)
    code, text, err = cli("qrels", "consensus", judged, "--method", method, *extra)
    assert code == 0, err
    recipe = json.loads(err.removeprefix("cranfield: consensus recipe: "))
    # the service's consensus of the same judgments, stored as a version of "made"
    body = {"method": method, "target": "made"}
    if method == "judge":
        body["judge"] = "llm"
    elif extra:
        body["judges"] = extra[1].split(",")
    resp = client.post(f"/v1/qrels/rag@{source['version']}/consensus", json=body)
    assert resp.status_code == 201, resp.get_json()
    stored = resp.get_json()
    assert {k: stored["consensus"][k] for k in ("method", "judges", "gains")} == \
        {k: recipe[k] for k in ("method", "judges", "gains")}
    assert recipe["source"] == {"file": str(judged)}
    assert recipe.get("tie") == stored["consensus"].get("tie")
    # the printed qrels put back are the stored version itself (one content, one version)
    gains = "real" if method == "mean" else "integer"
    printed = tmp_path / "consensus.txt"
    printed.write_text(text)
    code, out, err = cli("qrels", "put", "made", printed, "--server", served,
                         *(["--real-gains"] if gains == "real" else []))
    assert (code, err) == (0, ""), err
    assert out == f"made@{stored['version']}\n"
    assert api.put_qrels("made", text, gains=gains)["version"] == stored["version"]
    assert client.get("/v1/qrels/made").get_json()["versions"] == [stored["version"]]
    # the text by value: the grades the judges' rule gives
    lines = [line.split(" ") for line in text.splitlines()]
    assert [(t, d) for t, _, d, _ in lines] == sorted((t, d) for t, _, d, _ in lines)
    got = {(t, d): g for t, z, d, g in lines if z == "0"}
    assert len(got) == len(lines) == stored["judgments"]
    if method == "majority" and not extra:
        assert (got[("301", "d1")], got[("301", "d2")], got[("302", "d4")]) == ("2", "0", "0")
        assert got[("303", "d9")] == "2"
    if method == "mean" and not extra:
        assert got[("301", "d1")] == repr(5 / 3) and got[("303", "d8")] == "1.0"
    if method == "judge":
        assert got == {("301", "d1"): "2", ("301", "d2"): "1", ("302", "d3"): "1",
                       ("302", "d4"): "2", ("303", "d9"): "2"}
    # --format json: the recipe and the same grades
    code, out, err = cli("qrels", "consensus", judged, "--method", method, *extra,
                         "--format", "json")
    doc = json.loads(out)
    assert (code, err) == (0, "") and doc["consensus"] == recipe
    assert doc["judgments"] == len(lines) and doc["topics"] == len({t for t, *_ in lines})
    assert {(t, d): g for t, docs in doc["qrels"].items() for d, g in docs.items()} == \
        {k: (float(v) if gains == "real" else int(v)) for k, v in got.items()}


def test_consensus_of_a_file_refusals(tmp_path, monkeypatch):
    judged = tmp_path / "jg.txt"
    judged.write_text(JUDGED)
    code, _, err = cli("qrels", "consensus", judged, "--method", "judge", "--judge", "carol")
    assert code == 2 and "carol" in err
    code, _, err = cli("qrels", "consensus", judged, "--method", "max", "--target", "x")
    assert code == 1 and "--target" in err
    short = tmp_path / "short.txt"
    short.write_text("1 alice d\n")
    code, _, err = cli("qrels", "consensus", short, "--method", "max")
    assert code == 2 and "short.txt:1:" in err and "four fields" in err
    # standard input is a file here, as for agreement
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(JUDGED.encode())))
    code, out, _ = cli("qrels", "consensus", "-", "--method", "max")
    assert code == 0 and out == cli("qrels", "consensus", judged, "--method", "max")[1]


# -- rescore and stability ------------------------------------------------------------------------

TOPICS = [f"q{i}" for i in range(8)]
SYSTEMS = ("bm25", "dense", "splade")


def world(seed: int = 31) -> tuple[dict, dict, dict]:
    """(qrels v1, qrels v2 with about 20% more judgments, {system: [night runs]})."""
    rng = random.Random(seed)
    v1, v2, runs = {}, {}, {s: [] for s in SYSTEMS}
    for t in TOPICS:
        docs = [f"{t}-d{k}" for k in range(20)]
        v1[t] = {d: rng.choice((0, 0, 1, 2)) for d in docs[:10]}
        v2[t] = {**v1[t], **{d: rng.choice((0, 1, 1, 2)) for d in docs[10:12]}}
    for s, skill in zip(SYSTEMS, (0.3, 0.6, 0.9), strict=True):
        for _ in range(2):
            runs[s].append({t: {d: rng.random() + skill * v2[t].get(d, 0)
                                for d in (f"{t}-d{k}" for k in range(20))} for t in TOPICS})
    return v1, v2, runs


def recorded_world(client) -> tuple[str, str]:
    """Two nights of each system recorded under v1 with their runs kept, then v2: (v1, v2)."""
    v1, v2, runs = world()
    first = client.put("/v1/qrels/adhoc", json={"qrels": v1}).get_json()["version"]
    for system, nights in runs.items():
        for night, run in enumerate(nights):
            resp = client.post("/v1/evaluations", json={
                "run": run, "qrels_id": "adhoc", "measures": ["map", "P.5", "ndcg"],
                "record": {"system": system, "label": f"night-{night}", "keep_run": True}})
            assert resp.status_code == 200, resp.get_json()
    second = client.put("/v1/qrels/adhoc", json={"qrels": v2}).get_json()["version"]
    return f"adhoc@{first}", f"adhoc@{second}"


def test_rescore_then_stability_as_a_user_walks_it(client, served, tmp_path):
    v1, v2 = recorded_world(client)
    # one system: POST /v1/systems/{name}/rescore; --wait follows it to the end
    code, out, err = cli("rescore", "bm25", "--qrels-id", v2, "--wait", "--server", served)
    assert code == 0, err
    lines = out.splitlines()
    rescore_id = lines[0]
    doc = client.get(f"/v1/rescores/{rescore_id}").get_json()
    assert (doc["state"], doc["done"], doc["failed"], doc["total"]) == ("finished", 2, 0, 2)
    assert doc["systems"] == ["bm25"] and doc["qrels_id"] == v2
    assert lines[1].split() == ["result", "system", "state", "new_result", "reason"]
    assert sorted(tuple(line.split()) for line in lines[2:]) == sorted(
        (i["result_id"], "bm25", "done", i["new_result_id"]) for i in doc["items"])
    progress = err.splitlines()
    assert progress[-1] == (f"cranfield: rescore {rescore_id}: finished, 2 of 2 done, "
                            "0 failed, 0 skipped, 0 queued")
    assert all(p.startswith(f"cranfield: rescore {rescore_id}: ") for p in progress)
    # several systems: POST /v1/rescores; without --wait, the id alone
    code, out, err = cli("rescore", "dense", "splade", "--qrels-id", v2, "--server", served)
    assert (code, err) == (0, "")
    several = out.strip()
    api = Client(served)
    done = api.wait_rescore(several, timeout=120)
    assert done["systems"] == ["dense", "splade"] and done["done"] == 4
    assert api.rescore_status(several) == client.get(f"/v1/rescores/{several}").get_json()
    # again under the same version: done at once, nothing recorded again
    again = api.rescore(["bm25", "dense", "splade"], v2, wait=True, timeout=120)
    assert (again["done"], again["failed"]) == (6, 0)
    assert sorted(again["new_result_ids"]) == sorted(doc["new_result_ids"] +
                                                     done["new_result_ids"])
    code, out, _ = cli("rescore", "bm25", "--qrels-id", v2, "--wait", "--format", "json",
                       "--server", served)
    assert code == 0 and json.loads(out)["new_result_ids"] == doc["new_result_ids"]

    # do the conclusions hold? the route's text byte for byte, its JSON, its page
    query = f"measure=map&from={v1}&to={v2}"
    for extra, params in (([], ""), (["--test", "randomization", "--correction", "bh",
                                      "--alpha", "0.1", "--seed", "5", "--resamples", "200",
                                      "--permutations", "500", "--persistence", "0.8",
                                      "--level", "0.9"],
                                     "&test=randomization&correction=bh&alpha=0.1&seed=5"
                                     "&resamples=200&permutations=500&persistence=0.8"
                                     "&level=0.9")):
        route = client.get(f"/v1/stability?{query}{params}", headers={"Accept": PLAIN})
        assert route.status_code == 200
        code, out, err = cli("stability", "--measure", "map", "--from", v1, "--to", v2,
                             *extra, "--server", served)
        assert (code, err) == (0, "")
        assert out == route.get_data(as_text=True)
        code, out, _ = cli("stability", "--measure", "map", "--from", v1, "--to", v2, *extra,
                           "--format", "json", "--server", served)
        assert json.loads(out) == client.get(f"/v1/stability?{query}{params}").get_json()
    stability = json.loads(out)
    assert sorted(s["name"] for s in stability["systems"]) == sorted(SYSTEMS)
    assert {s["paired_by"] for s in stability["systems"]} == {"night"}
    assert stability["n_topics"] == len(TOPICS)
    page = tmp_path / "stability.html"
    code, out, err = cli("stability", "--measure", "map", "--from", v1, "--to", v2, "-o", page,
                         "--server", served)
    assert code == 0 and "saved to" in err
    html = client.get(f"/v1/stability?{query}", headers={"Accept": "text/html"})
    assert page.read_text() == html.get_data(as_text=True)
    assert out == client.get(f"/v1/stability?{query}", headers={"Accept": PLAIN}).get_data(
        as_text=True)
    code, out, _ = cli("stability", "--measure", "map", "--from", v1, "--to", v2,
                       "--format", "html", "--server", served)
    assert code == 0 and out == html.get_data(as_text=True)
    assert api.stability("map", v1, v2, accept=PLAIN) == client.get(
        f"/v1/stability?{query}", headers={"Accept": PLAIN}).get_data(as_text=True)
    assert api.stability("map", v1, v2, seed=0) == client.get(
        f"/v1/stability?{query}").get_json()
    with pytest.raises(TypeError, match="persistance"):
        api.stability("map", v1, v2, persistance=0.9)


def test_rescore_and_stability_refusals(client, served, monkeypatch):
    v1, v2 = recorded_world(client)
    # an item that fails (here the worker's step crashes on one result): --wait exits 1,
    # the item listed as failed with the reason, the others done
    import backend.rescoring

    first = client.get("/v1/systems/dense/results").get_json()["items"][-1]["id"]
    real = backend.rescoring.rescore_one

    def crashing(store, results, wire, connection=None):
        if wire["result_id"] == first:
            raise RuntimeError("the disk is on fire")
        return real(store, results, wire, connection)

    monkeypatch.setattr(backend.rescoring, "rescore_one", crashing)
    code, out, err = cli("rescore", "dense", "--qrels-id", v2, "--wait", "--server", served)
    assert code == 1, err
    rows = {line.split()[0]: line for line in out.splitlines()[2:]}
    assert rows[first].split()[1:4] == ["dense", "failed", "-"]
    assert rows[first].endswith("RuntimeError: the disk is on fire")
    assert [r.split()[2] for k, r in rows.items() if k != first] == ["done"]
    assert err.splitlines()[-1].endswith("finished, 1 of 2 done, 1 failed, 0 skipped, "
                                         "0 queued")
    monkeypatch.undo()
    # unknown system, unknown qrels (a 422 naming qrels_id, of kind unknown-qrels): 6;
    # no --server: 1
    assert cli("rescore", "nobody", "--qrels-id", v2, "--server", served)[0] == 6
    code, _, err = cli("rescore", "bm25", "--qrels-id", "nope@0123456789abcdef",
                       "--server", served)
    assert code == 6 and "qrels" in err
    assert cli("rescore", "bm25", "--qrels-id", v2)[0] == 1
    assert cli("rescore", "bm25", "--qrels-id", v2, "--timeout", "5", "--server", served)[0] == 1
    with pytest.raises(ApiError) as caught:
        Client(served).rescore_status("0" * 32)
    assert caught.value.status == 404
    # stability: a version nobody recorded under is a 404 (exit 6), a bad option exit 2
    code, _, err = cli("stability", "--measure", "map", "--from", v1,
                       "--to", "adhoc@0123456789abcdef", "--server", served)
    assert code == 6 and "adhoc@0123456789abcdef" in err
    assert cli("stability", "--measure", "map", "--from", v1, "--to", v2, "--alpha", "1.5",
               "--server", served)[0] == 2
    code, _, err = cli("stability", "--measure", "nosuch", "--from", v1, "--to", v2,
                       "--server", served)
    assert code in (1, 2) and "nosuch" in err
