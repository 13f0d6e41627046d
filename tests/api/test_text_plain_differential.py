"""``Accept: text/plain`` is ``cranfield eval``'s output (issue #26's differential): the same
request sent as a JSON body with mappings, a JSON body with TREC text, multipart TREC files,
multipart and JSON with stored qrels (``qrels_id``), and queued (``Prefer: respond-async``,
then ``GET /v1/jobs/{id}`` as text/plain) answers the same bytes, and they are what the
``cranfield eval`` command (a real process) prints on the same data written to files: the
summary unless ``per_topic`` is true (``-q``), trec_eval's names (``ndcg_cut_10`` for
``nDCG@10``). Real data: trec_eval's own test qrels and runs. Responses are checked against
openapi.yaml (ContractClient)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import finished_job

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
CRANFIELD = str(Path(sys.executable).with_name("cranfield"))

BASIC = ["nDCG@10", "P.5", "map", "recip_rank"]
# named two ways (collapse to one line), and measures trec_eval lacks (their key, last)
MIXED = ["ERR@20", "nDCG@10", "P@5", "ndcg_cut.10", "AP", "P(rel=2)@5", "RR@10", "num_rel_ret",
         "recip_rank"]

# (name, qrels file, run file, measures, options as the API's, cranfield eval's flags)
CASES = [
    ("basic", "qrels.test", "results.test", BASIC, {}, []),
    ("mixed-names", "qrels.rel_level", "results.test", MIXED, {}, []),
    ("relevance-level-2", "qrels.rel_level", "results.test", BASIC, {"relevance_level": 2},
     ["-l", "2"]),
    ("depth-50", "qrels.test", "results.test", BASIC, {"depth": 50}, ["-M", "50"]),
    ("judged-only", "qrels.rel_level", "results.test", BASIC, {"judged_only": True}, ["-J"]),
    ("complete-topics", "qrels.test", "results.trunc", BASIC, {"complete_topics": True},
     ["-c"]),
    ("all-options", "qrels.rel_level", "results.test", MIXED,
     {"relevance_level": 2, "depth": 20, "judged_only": True, "profile": "trec_eval-10"},
     ["-l", "2", "-M", "20", "-J", "--profile", "10"]),
]
PER_TOPIC = [None, False, True]  # None: not given (text/plain: the summary, as without -q)
TEXT = {"Accept": "text/plain"}


def cranfield_eval(qrels: str, run: str, measures: list[str], flags: list[str],
                   per_topic: bool) -> str:
    """``cranfield eval``'s standard output, run as the command it is."""
    argv = [CRANFIELD, "eval", *flags, *(["-q"] if per_topic else []),
            *[a for m in measures for a in ("-m", m)], str(DATA / qrels), str(DATA / run)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def mapping(path: str, kind: str) -> dict:
    """A TREC file as the JSON body's ``{topic: {docid: value}}`` (a run's score, a qrels'
    grade)."""
    out: dict[str, dict] = {}
    for line in (DATA / path).read_text().splitlines():
        f = line.split()
        if kind == "run":
            out.setdefault(f[0], {})[f[2]] = float(f[4])
        else:
            out.setdefault(f[0], {})[f[2]] = int(f[3])
    return out


def fields(measures: list[str], options: dict, per_topic: bool | None) -> dict:
    body = {"measures": measures, "options": options}
    if per_topic is not None:
        body["per_topic"] = per_topic
    return body


def form(measures: list[str], options: dict, per_topic: bool | None) -> dict:
    """The same fields as a multipart form: options as plain fields."""
    data = {"measures": ",".join(measures)}
    data.update({k: str(v).lower() if isinstance(v, bool) else str(v)
                 for k, v in options.items()})
    if per_topic is not None:
        data["per_topic"] = str(per_topic).lower()
    return data


def text_of(resp) -> bytes:
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert resp.mimetype == "text/plain"
    return resp.get_data()


def queued_text(client, **post) -> bytes:
    """POSTed with ``Prefer: respond-async`` and ``Accept: text/plain`` (202), then the
    finished job fetched as text/plain."""
    queued = client.post("/v1/evaluations", headers={**TEXT, "Prefer": "respond-async"},
                         **post)
    assert queued.status_code == 202, queued.get_data(as_text=True)
    job = finished_job(client, queued.headers["Location"])
    assert job["status"] == "finished", job
    return text_of(client.get(queued.headers["Location"], headers=TEXT))


def every_way(client, qrels_file: str, run_file: str, measures: list[str], options: dict,
              per_topic: bool | None) -> dict[str, bytes]:
    """The text/plain answer to the one request, sent each way in."""
    run_text, qrels_text = (DATA / run_file).read_text(), (DATA / qrels_file).read_text()
    body = fields(measures, options, per_topic)
    qrels_id = qrels_file.replace(".", "-")
    put = client.put(f"/v1/qrels/{qrels_id}", data=qrels_text, content_type="text/plain")
    assert put.status_code in (200, 201), put.get_data(as_text=True)

    def files(with_qrels: bool) -> dict:
        data = {"run": (io.BytesIO(run_text.encode()), run_file)}
        if with_qrels:
            data["qrels"] = (io.BytesIO(qrels_text.encode()), qrels_file)
        else:
            data["qrels_id"] = qrels_id
        return dict(data, **form(measures, options, per_topic))

    post = client.post
    return {
        "json mappings": text_of(post("/v1/evaluations", headers=TEXT, json=dict(
            body, run=mapping(run_file, "run"), qrels=mapping(qrels_file, "qrels")))),
        "json trec text": text_of(post("/v1/evaluations", headers=TEXT, json=dict(
            body, run=run_text, qrels=qrels_text))),
        "multipart files": text_of(post("/v1/evaluations", headers=TEXT, data=files(True),
                                        content_type="multipart/form-data")),
        "multipart qrels_id": text_of(post("/v1/evaluations", headers=TEXT,
                                           data=files(False),
                                           content_type="multipart/form-data")),
        "json qrels_id": text_of(post("/v1/evaluations", headers=TEXT, json=dict(
            body, run=run_text, qrels_id=qrels_id))),
        "queued json": queued_text(client, json=dict(body, run=run_text, qrels=qrels_text)),
        "queued multipart": queued_text(client, data=files(True),
                                        content_type="multipart/form-data"),
    }


@pytest.mark.parametrize("per_topic", PER_TOPIC, ids=["per_topic-absent", "per_topic-false",
                                                      "per_topic-true"])
@pytest.mark.parametrize(("name", "qrels", "run", "measures", "options", "flags"), CASES,
                         ids=[c[0] for c in CASES])
def test_text_plain_is_cranfield_eval_s_output_every_way_in(client, name, qrels, run,
                                                            measures, options, flags,
                                                            per_topic):
    expected = cranfield_eval(qrels, run, measures, flags, bool(per_topic)).encode()
    answers = every_way(client, qrels, run, measures, options, per_topic)
    for way, got in answers.items():
        assert got == expected, f"{way}:\n{got.decode()}\n!= cranfield eval:\n" \
                                f"{expected.decode()}"
    lines = expected.decode().splitlines()
    names = [line.split("\t")[0].rstrip() for line in lines]
    # trec_eval's names where trec_eval has the measure, once each; the rest as asked, last
    printed = ["map", "recip_rank", "P_5", "ndcg_cut_10"] if measures is BASIC else \
        ["num_rel_ret", "map", "recip_rank", "P_5", "ndcg_cut_10", "ERR@20", "P(rel=2)@5",
         "RR@10"]
    assert list(dict.fromkeys(names)) == printed
    # results.trunc lacks topic 302: -c averages it in as 0 but 9.0.8 prints no line for it
    topics = 2 if run == "results.trunc" else 3
    assert len(lines) == len(printed) * ((topics + 1) if per_topic else 1)
    assert all(line.split("\t")[1] == "all" for line in lines[-len(printed):])


def test_the_numbers_are_trec_eval_s(client):
    """One case pinned to trec_eval 9.0.8's own output (out.test.a: all_trec on qrels.test
    and results.test), through a JSON mapping body, as ir_measures names."""
    official = {line.split()[0]: line for line in
                (DATA / "v9.0.8" / "out.test.a").read_text().splitlines(keepends=True)}
    body = {"run": mapping("results.test", "run"), "qrels": mapping("qrels.test", "qrels"),
            "measures": ["nDCG", "AP", "P@5", "RR", "Rprec", "Bpref"]}
    got = text_of(client.post("/v1/evaluations", json=body, headers=TEXT)).decode()
    assert got == "".join(official[k] for k in ("map", "Rprec", "bpref", "recip_rank", "P_5",
                                                "ndcg"))
