"""ranx's spellings give ranx's values (issue #28), against ranx itself.

ranx is not a test dependency (it pulls numba): its values were computed by
tests/data/ranx_oracle/make_expected.py (ranx 0.3.21; the versions, seed and command are in
expected.json's ``provenance``) on the random qrels.txt / run.txt committed beside it:
16 topics, grades 0..3, tied scores, unjudged documents retrieved, a topic with no relevant
document. Every spelling is checked per topic and as the mean, to 1e-9: the -lN relevance
level on every measure ranx takes it, the cutoffs 1, 3, 5, 10, 30 (some past a short run's
end) and the bare spellings, which ranx reads over the whole ranking.

ranx breaks ties its own way (numba's argsort of hashed ids); it was given the documents in
trec_eval's order (``ranx_order``, checked here against run.txt), which is how Cranfield
ranks them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trec_order import trec_order

import cranfield
from cranfield.measures import REGISTRY
from cranfield.reports.measure_docs import describe

HERE = Path(__file__).resolve().parents[1] / "data" / "ranx_oracle"
QRELS, RUN = HERE / "qrels.txt", HERE / "run.txt"
TOLERANCE = 1e-9
DOC = json.loads((HERE / "expected.json").read_text(encoding="ascii"))
VALUES = DOC["values"]


def read(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text(encoding="ascii").splitlines()]


def test_the_committed_values_say_where_they_came_from():
    p = DOC["provenance"]
    assert p["tool"] == "ranx" and p["ranx"] == "0.3.21" and p["seed"] == 28
    assert p["command"] == "python tests/data/ranx_oracle/make_expected.py"
    assert {"numba", "numpy", "python", "ties"} <= set(p)


def test_the_data_have_what_the_oracle_is_for():
    run: dict[str, dict[str, float]] = {}
    for t, _, d, _, s, _ in read(RUN):
        run.setdefault(t, {})[d] = float(s)
    qrels: dict[str, dict[str, int]] = {}
    for t, _, d, g in read(QRELS):
        qrels.setdefault(t, {})[d] = int(g)
    # ranx ranked the documents as trec_eval does
    assert DOC["ranx_order"] == {t: trec_order(docs) for t, docs in run.items()}
    assert len(run) >= 12 and set(run) == set(qrels)
    assert {g for docs in qrels.values() for g in docs.values()} == {0, 1, 2, 3}
    # ties: some topic's tie group straddles a cutoff the spellings use
    straddles = 0
    for t, docs in run.items():
        order = DOC["ranx_order"][t]
        for k in (1, 3, 5, 10, 30):
            if k < len(order) and docs[order[k - 1]] == docs[order[k]]:
                straddles += 1
    assert straddles >= 10
    assert any(all(g == 0 for g in docs.values()) for docs in qrels.values())
    assert any(d not in qrels[t] for t, docs in run.items() for d in docs)  # unjudged


def expected_spellings() -> set[str]:
    levels = ("", "-l0", "-l1", "-l2", "-l3")
    at_k = ("hits", "hit_rate", "precision", "recall", "f1", "mrr", "map", "ndcg", "dcg",
            "ndcg_burges", "dcg_burges")
    bare = ("hits", "hit_rate", "precision", "f1", "mrr", "map", "ndcg", "dcg", "ndcg_burges",
            "dcg_burges", "r-precision", "rbp.95", "rbp@9")
    out = {f"{m}@{k}{lv}" for m in at_k for k in (1, 3, 5, 10, 30) for lv in levels}
    out |= {f"{m}{lv}" for m in bare for lv in levels}
    out |= {f"recall{lv}" for lv in levels[1:]} | {f"bpref{lv}" for lv in levels[2:]}
    return out


def test_every_ranx_measure_and_level_is_in_the_oracle():
    assert expected_spellings() <= set(VALUES)


def _evaluate(names: list[str], topics: list[str] | None, profile: str):
    if topics is None:
        return cranfield.evaluate(QRELS, RUN, names, profile=profile)
    keep = set(topics)
    qrels = "".join(" ".join(r) + "\n" for r in read(QRELS) if r[0] in keep)
    run = "".join(" ".join(r) + "\n" for r in read(RUN) if r[0] in keep)
    return cranfield.evaluate(cranfield.read_qrels(qrels), cranfield.read_run(run), names,
                              profile=profile)


def _groups() -> dict[tuple[str, ...] | None, list[str]]:
    groups: dict[tuple[str, ...] | None, list[str]] = {}
    for name, v in VALUES.items():
        groups.setdefault(tuple(v["topics"]) if "topics" in v else None, []).append(name)
    return groups


@pytest.mark.parametrize("profile", sorted(cranfield.PROFILES))
def test_cranfield_gives_ranxs_values_per_topic_and_mean(profile):
    checked = 0
    for topics, names in _groups().items():
        ev = _evaluate(names, list(topics) if topics is not None else None, profile)
        bad = []
        for name in names:
            want = VALUES[name]
            for t, v in want["per_topic"].items():
                if not abs(ev.per_topic[t][name] - v) <= TOLERANCE:
                    bad.append((name, t, ev.per_topic[t][name], v))
            if not abs(ev.aggregate[name] - want["mean"]) <= TOLERANCE:
                bad.append((name, "mean", ev.aggregate[name], want["mean"]))
            checked += 1
        assert not bad, bad[:5]
    assert checked == len(VALUES)


def test_a_ranx_name_that_is_trec_evals_keeps_trec_evals_meaning():
    """Bare ``recall`` is trec_eval's recall at its cutoffs (recall_5 ... recall_1000);
    ranx's recall of the whole ranking is ``recall-l1`` (ranx's level suffix makes it
    ranx's spelling). map, ndcg and bpref bare are trec_eval's and equal ranx's."""
    ev = cranfield.evaluate(QRELS, RUN, ["recall", "recall-l1", "set_recall"])
    assert "recall_5" in ev.aggregate and "recall_1000" in ev.aggregate
    assert ev.aggregate["recall-l1"] == ev.aggregate["set_recall"]
    assert abs(ev.aggregate["recall-l1"] - VALUES["recall-l1"]["mean"]) <= TOLERANCE


def test_cranfield_measures_names_ranxs_spellings_with_tool_ranx():
    def tools(name):
        return {s["name"]: s["tool"] for s in describe(REGISTRY[name])["spellings"]}

    assert tools("success")["hit_rate"] == "ranx"
    assert tools("success")["hit_rate@k-l<N>"] == "ranx"
    assert tools("set_recall")["recall-l<N>"] == "ranx"
    assert tools("map")["map-l<N>"] == "ranx" and tools("map")["map"] == "trec_eval"
    # dcg-lN is dcg_gd(min_grade=N) (one parameter, not a gains entry per grade below N)
    assert tools("dcg_gd")["dcg-l<N>"] == "ranx" and tools("dcg_gd")["dcg@k-l<N>"] == "ranx"
    assert tools("ndcg_gd")["ndcg_burges@k-l<N>"] == "ranx"
    assert tools("dcg_gd")["dcg_burges-l<N>"] == "ranx"
    assert tools("bpref")["bpref-l<N>"] == "ranx"
    assert tools("Rprec")["r-precision-l<N>"] == "ranx"
    assert tools("ranx_rbp")["rbp@<p>-l<N>"] == "ranx"
