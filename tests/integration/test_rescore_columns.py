"""A re-score read from the kept run's columns gives the numbers of the run as sent (issue #31).

The re-score job reads the kept run back as columns (``KeptRuns.read``) and, sharded, cuts it
by topic into Arrow IPC pieces (``backend.rescoring.column_pieces``); no TREC text is made or
parsed. Here a run whose ranking hangs on the details text and columns could differ in —
scores tied across many documents (broken by docid bytes, descending: ASCII case, digits
against letters, 2-, 3- and 4-byte UTF-8), -0 against 0, the shortest repr of doubles
(0.30000000000000004, 5e-324), scores spelled 1.50 / 1.5e0, topics whose byte order is not
their numeric order, lines shuffled — is recorded with its run kept under qrels v1, then
re-scored under v2 (judgments added and regraded), sharded into three pieces and in one job.
Each re-score's document equals the one a direct ``cranfield.evaluate`` of the original TREC
text under v2 gives: every measure's value on every topic, the aggregates and the topic sets,
compared with ``==`` (bit for bit), with default options, with ``complete_topics`` and
under the profile that compares scores as doubles.

The sharded re-score runs the functions the workers run (the re-score job, each shard job,
the combine step) in this process, the jobs read from a private redis-server where the
re-score job queued them.
"""

from __future__ import annotations

import random

import pytest
from servers import RedisServer, require_redis_server

MEASURES = ["map", "ndcg", "ndcg_cut.10", "P.5", "recall.10", "recip_rank", "Rprec", "bpref",
            "num_ret", "num_rel_ret"]
# ids whose byte order matters (str order is code point order, which UTF-8 bytes keep)
TOPICS = ["1", "10", "100", "2", "9", "A", "Z", "a", "q\u00e9", "z", "\u00e9t\u00e9",
          "\u6f22", "\U0001f600", "solo", "run-only"]
DOCS = ["d1", "d10", "d2", "D1", "D10", "a", "A", "a-b", "a_b", "e", "\u00e9", "\u00e9a",
        "\u00fc1", "z", "Z9", "\u6f22\u5b57", "\U0001f600x", "x\U0001f600", "0", "00", "9"]
# few distinct values: many ties
SCORES = ["1.0", "1.50", "1.5e0", "0.30000000000000004", "0.3", "5e-324", "1e-300", "0",
          "-0", "-0.0", "-1.5", "123456789.123456789", "7"]

# a topic ranked by the last bit of its scores (profile trec_eval-10, which compares
# doubles; 9.0.8 compares float32, as trec_eval): a (0.30000000000000004) above z (0.3), b
# (5e-324) above y, x and c (0, 0.0 and -0, tied: y, x, c by docid descending); a score
# read a bit off, or -0 not tied with 0, ranks the relevant z, y and x elsewhere
PRECISE = ["prec Q0 a 1 0.30000000000000004 col-run", "prec Q0 z 2 0.3 col-run",
           "prec Q0 b 3 5e-324 col-run", "prec Q0 y 4 0 col-run", "prec Q0 c 5 -0 col-run",
           "prec Q0 x 6 0.0 col-run"]
PRECISE_QRELS = ["prec 0 z 1", "prec 0 y 1", "prec 0 x 2", "prec 0 c 0", "prec 0 a 0"]


def _run_text() -> bytes:
    rng = random.Random(31)
    lines = []
    for t in TOPICS:
        docs = ["d1"] if t == "solo" else rng.sample(DOCS, rng.randint(8, len(DOCS)))
        for rank, d in enumerate(docs, 1):
            lines.append(f"{t} Q0 {d} {rank} {rng.choice(SCORES)} col-run")
    lines += PRECISE
    rng.shuffle(lines)
    return ("\n".join(lines) + "\n").encode("utf-8")


def _qrels_texts() -> tuple[bytes, bytes]:
    rng = random.Random(131)
    v1, v2 = [], []
    for t in [*TOPICS[:-1], "qrels-only"]:  # run-only is judged in neither
        judged = rng.sample(DOCS, 12)
        grades = {d: rng.choice([0, 0, 1, 2]) for d in judged[:9]}
        grades[judged[0]] = max(grades[judged[0]], 1)
        v1 += [f"{t} 0 {d} {g}" for d, g in grades.items()]
        more = dict(grades, **{d: rng.choice([0, 1, 2]) for d in judged[9:]})
        more[judged[1]] = 2 - min(more[judged[1]], 2)  # regraded
        v2 += [f"{t} 0 {d} {g}" for d, g in more.items()]
    v1, v2 = v1 + PRECISE_QRELS, v2 + PRECISE_QRELS
    return ("\n".join(v1) + "\n").encode(), ("\n".join(v2) + "\n").encode()


@pytest.fixture(scope="module")
def redis():
    require_redis_server()
    server = RedisServer()
    server.start()
    try:
        from backend.store import redis_client

        yield redis_client(server.url)
    finally:
        server.stop()


def _setting(shards: int) -> dict:
    return {"shards": shards, "shard_min_bytes": 0, "job_timeout": 600, "result_ttl": 600,
            "queued_ttl": 600, "input_ttl": 600, "table_bounds": None, "work_bounds": None}


@pytest.mark.parametrize("options", [{}, {"complete_topics": True},
                                     {"profile": "trec_eval-10"}],
                         ids=["default", "-c", "doubles"])
@pytest.mark.parametrize("sharded", [True, False], ids=["sharded", "one-job"])
def test_rescore_from_columns_equals_the_text(redis, tmp_path, sharded, options):
    from rq.job import Job

    import cranfield
    from backend import rescoring
    from backend.contract import ShardJob
    from backend.kept_runs import KeptRuns
    from backend.results import ResultStore
    from backend.store import MemoryStore
    from backend.tasks import run_shard
    from cranfield.reports.result_document import evaluation_document

    text = _run_text()
    v1_text, v2_text = _qrels_texts()
    store = MemoryStore()
    results = ResultStore(f"sqlite:///{tmp_path / 'results.db'}")
    results.upgrade()
    v1, _ = store.put_qrels("team", cranfield.read_qrels(v1_text))
    v2, _ = store.put_qrels("team", cranfield.read_qrels(v2_text))
    run = cranfield.read_run(text)
    night = cranfield.evaluate(cranfield.read_qrels(v1_text), run, MEASURES, **options)
    doc = evaluation_document(night, {"per_topic": True}, "sha-of-text", v1["sha256"], None,
                              f"team@{v1['version']}")
    original = KeptRuns(results).record_with_run(None, {"system": "s", "label": "night"}, doc,
                                                 run)
    rescore_id, queued = rescoring.plan(results, None, ["s"], f"team@{v2['version']}",
                                        v2["sha256"])
    assert [q["result_id"] for q in queued] == [original["id"]]
    wire = {"tenant": None, "rescore_id": rescore_id, "qrels_ref": f"team@{v2['version']}",
            "position": 0, "result_id": original["id"], "job_id": queued[0]["job_id"],
            "settings": _setting(3)}

    if sharded:
        assert rescoring.rescore_one(store, results, wire, redis) == {"shards": 3}
        shard_wires = [Job.fetch(f"{wire['job_id']}-shard-{i}", connection=redis).args[0]
                       for i in range(3)]
        assert {w["run_format"] for w in shard_wires} == {"arrow"}
        # Arrow IPC streams (continuation marker), not TREC text
        assert all(store.get_blob(w["run_key"])[:4] == b"\xff\xff\xff\xff"
                   for w in shard_wires)
        shards = [run_shard(store, ShardJob.from_wire(w)) for w in shard_wires]
        pieces = [s["run_topics"] for s in shards]
        assert sorted(t for p in pieces for t in p) == sorted(run.topics)  # disjoint, all
        assert all(pieces)
        combine = Job.fetch(f"{wire['job_id']}-combine", connection=redis).args[0]
        outcome = rescoring.rescore_combine(store, results, combine, shards)
    else:
        outcome = rescoring.rescore_one(store, results, dict(wire, settings=_setting(1)))
    assert set(outcome) == {"result_id"}, outcome

    got = results.get(None, outcome["result_id"])["document"]
    want_ev = cranfield.evaluate(cranfield.read_qrels(v2_text), cranfield.read_run(text),
                                 MEASURES, **options)
    want = evaluation_document(want_ev, {"per_topic": True}, "x", v2["sha256"], None)
    assert got["per_topic"] == want["per_topic"]
    assert list(got["per_topic"]) == list(want["per_topic"])
    assert got["aggregate"] == want["aggregate"]
    assert got["topics"] == want["topics"]
    assert got["provenance"]["runid"] == "col-run"
    assert got["provenance"]["rescores"] == original["id"]
    # ties decide values here: the same run with its tied scores broken by docid ascending
    # instead (trec_eval: descending) evaluates otherwise, so the equality is not by chance
    rows = [line.split() for line in text.decode().splitlines()]
    rows.sort(key=lambda r: (r[0], -float(r[4]), r[2].encode()))
    flipped = {}
    for i, (t, _, d, _, _, _) in enumerate(rows):
        flipped.setdefault(t, {})[d] = float(len(rows) - i)
    other = cranfield.evaluate(cranfield.read_qrels(v2_text), flipped, MEASURES, **options)
    assert evaluation_document(other, {"per_topic": True}, "x", "y", None)["per_topic"] \
        != want["per_topic"]
    progress = rescoring.progress(results, None, rescore_id)
    assert (progress["done"], progress["failed"]) == (1, 0), progress
