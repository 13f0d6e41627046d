"""The input lint's "a score tie straddles rank k" (``Evaluation.cutoff_ties``), for every
cutoff the measures use, against a direct check written here: sort each topic as trec_eval
does and compare the k-th and (k+1)-th scores."""

from __future__ import annotations

import numpy as np
import pytest

import cranfield


def expected_ties(run: dict, evaluated: list[str], ks: list[int], float32: bool) -> dict:
    out = {}
    for k in ks:
        flags = []
        for topic in evaluated:
            scores = sorted((np.float32(s) if float32 else s for s in run.get(topic, {}).values()),
                            reverse=True)
            flags.append(len(scores) > k and scores[k - 1] == scores[k])
        out[k] = flags
    return out


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("profile", ["trec_eval-9.0.8", "trec_eval-10"])
def test_ties_at_cutoffs_equal_a_direct_check(seed, profile):
    rng = np.random.default_rng(seed)
    run, qrels = {}, {}
    for t in range(int(rng.integers(1, 7))):
        n = int(rng.integers(0, 25))
        # few distinct scores, so that ties are common; some differ only beyond float32
        scores = rng.integers(0, 6, n) + np.where(rng.random(n) < 0.2, 1e-9, 0.0)
        if n:
            run[f"t{t}"] = {f"d{i}": float(s) for i, s in enumerate(scores)}
        qrels[f"t{t}"] = {"d0": 1, "x": 0}
    if not run:
        run["t0"] = {"d0": 1.0}
    ks = [1, 3, 5, 10]
    ev = cranfield.evaluate(qrels, run, ["P.1,3,5,10"], profile=profile)
    want = expected_ties(run, ev.ranked.topics, ks, float32=profile != "trec_eval-10")
    got = {k: [bool(x) for x in v] for k, v in ev.cutoff_ties.items()}
    assert got == want
    # the same from TREC text, whose rows come in file order (not score order)
    text = "".join(f"{t} Q0 {d} 0 {s!r} r\n" for t, docs in run.items()
                   for d, s in docs.items())
    from_text = cranfield.evaluate(qrels, text, ["P.1,3,5,10"], profile=profile)
    assert {k: [bool(x) for x in v] for k, v in from_text.cutoff_ties.items()} == want
