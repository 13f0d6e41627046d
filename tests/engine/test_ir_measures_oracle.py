"""Issue #15: an ir_measures name gives ir_measures' value. Every measure of ir_measures
0.4.3's registry that one of its providers computes is compared, per topic, to 1e-9, with
Cranfield's value for the same name, against every installed provider that supports it
(pytrec_eval, gdeval, pyndeval, cwl_eval, judged, msmarco, compat, accuracy); the measures
no provider computes (RBP without rel=, RBP@k, ERR without a cutoff, the diversity measures
without a cutoff) are checked against direct implementations written here from the cited
papers. The data are generated with fixed seeds: several topics, graded qrels from -2 to 4
(negative grades: judged but unjudged to trec_eval, judged to ir_measures' Judged), score
ties, retrieved documents with no judgment, judged documents never retrieved, a topic with
no relevant document and one whose judgments are all relevant.

The oracles are test-time dependencies only (pyproject's ``test`` extra); the engine never
imports them.

Ties. Cranfield ranks as trec_eval does for every measure: score descending, ties by docno
descending. pytrec_eval and gdeval do the same; ir_measures' Python providers break ties by
docid ascending (judged, msmarco, compat, pyndeval) or keep the input order (cwl_eval,
accuracy). Those providers are handed the same run with its documents renamed in
Cranfield's rank order (``r00000``, ``r00001``, ...) and listed in that order, so that every
tool ranks the same documents the same way; the scores, and so the ties, stay as they are.

Known differences between ir_measures' providers, which are not Cranfield's to reproduce:
- cwl_eval's AP divides by the relevant documents retrieved (within its 1000 ranks), not by
  R; ir_measures' default pipeline computes AP with pytrec_eval, which Cranfield matches;
- gdeval prints 5 decimals: it is run here from ir_measures' own copy of gdeval.pl with
  only its printf format widened to 17 significant digits (and the 5-decimal provider's
  values are checked to 5e-6 as well);
- NumQ has no per-topic value in Cranfield (trec_eval's num_q): its summary is compared.
"""

from __future__ import annotations

import math
import pkgutil
import shutil
import subprocess

# ir_measures, pyndeval and cwl: test-time oracles from the project's test extra; a missing
# one fails the run, it does not skip it
import cwl  # noqa: F401
import ir_measures
import numpy as np
import pyndeval  # noqa: F401
import pytest
from trec_order import trec_order

import cranfield
from cranfield import parse_measure

TOLERANCE = 1e-9
SEEDS = (15, 16, 17)
TREC_ORDER = {"pytrec_eval", "gdeval"}  # break ties as trec_eval does
# the registry's measures, with the parameters worth exercising; every name is written the
# same way for both tools
ORACLE_NAMES = [
    "AP", "AP@5", "AP(rel=2)", "AP(rel=2)@10", "MAP",
    "Accuracy", "Accuracy@5", "Accuracy(rel=2)@10",
    "BPM(T=1.0,max_rel=4)@10", "BPM(T=2.0,min_rel=1,max_rel=3)@20",
    "BPref", "Bpref", "Bpref(rel=2)",
    "Compat", "Compat(p=0.8)", "Compat(normalize=False)",
    "ERR@5", "ERR@20",
    "INSQ(max_rel=4)", "INSQ(T=2.0,max_rel=4)", "INST(max_rel=4)", "INST(T=2.0,max_rel=3)",
    "IPrec@0.0", "IPrec@0.5", "IPrec@1.0",
    "Judged", "Judged@5", "Judged@10",
    "MRR", "MRR@10", "RR", "RR@5", "RR@10", "RR(rel=2)@10",
    "NDCG", "nDCG", "nDCG@5", "nDCG@10", "nDCG(dcg='exp-log2')@10", "nDCG(dcg='exp-log2')@20",
    "nDCG(gains={0:0,1:1,2:3,3:5,4:8})", "nDCG(gains={0:0,1:1,2:3,3:5,4:8})@10",
    "NDCG(gains={1:0,2:1,3:1,4:2})@5",
    "NERR8(max_rel=4)@10", "NERR9(max_rel=4)@10", "NERR10(max_rel=4)",
    "NERR10(p=0.5,max_rel=4)", "NERR11(max_rel=4)", "NERR11(T=2.0,max_rel=4)",
    "NumRel", "NumRelRet", "NumRet", "NumRet(rel=2)",
    "P@5", "P@10", "P(rel=2)@5", "Precision@5", "R@5", "R@100", "Recall@10",
    "RBP(rel=1)", "RBP(rel=2,p=0.9)",
    "RPrec", "Rprec", "Rprec(rel=2)",
    "SDCG(max_rel=4)@10", "SDCG(min_rel=1,max_rel=3)@5",
    "SetAP", "SetF", "SetF(beta=0.5)", "SetF(beta=2.0)", "SetP", "SetP(rel=2)",
    "SetP(relative=True)", "SetR", "SetRelP",
    "Success@1", "Success@5", "Success(rel=2)@10", "infAP",
]
DIVERSITY_NAMES = [
    "ERR_IA@5", "ERR_IA@20", "ERR_IA(rel=2)@10", "nERR_IA@5", "nERR_IA@20",
    "alpha_DCG@5", "alpha_DCG(alpha=0.3)@10", "α_DCG@10", "alpha_nDCG@5", "alpha_nDCG@20",
    "α_nDCG@10", "alpha_nDCG(rel=2)@10", "NRBP", "NRBP(alpha=0.3,beta=0.7)", "nNRBP",
    "AP_IA", "MAP_IA", "AP_IA(rel=2)", "P_IA@5", "P_IA@20", "StRecall@5", "StRecall@20",
    "StRecall(rel=2)@10",
]
# provider pairs known to disagree with ir_measures' default (see the module docstring)
PROVIDER_DIFFERS = {("AP", "cwl_eval"), ("AP(rel=2)", "cwl_eval"), ("MAP", "cwl_eval")}
# no provider computes these: checked against the direct implementations below
DIRECT_NAMES = ["ERR", "RBP", "RBP(p=0.9)", "RBP@10", "RBP(rel=2)@5", "ERR_IA",
                "nERR_IA", "alpha_DCG", "alpha_nDCG", "P_IA", "StRecall"]


# ---------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------

def generate(seed: int, n_topics: int = 8):
    """(run, qrels, subtopic qrels) with numeric topic ids (gdeval wants them) and scores
    that are multiples of 1/4 (exact in a float, so both profiles rank alike), drawn from
    11 values: many ties."""
    rng = np.random.default_rng(seed)
    run: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    sub: list[tuple[str, int, str, int]] = []
    for t in range(1, n_topics + 1):
        topic = str(t)
        pool = [f"d{i:03d}" for i in range(int(rng.integers(40, 160)))]
        judged = rng.choice(pool, size=int(rng.integers(8, 35)), replace=False)
        if t == 3:  # nothing relevant
            grades = rng.choice([-2, -1, 0], size=len(judged))
        elif t == 4:  # every judgment relevant
            grades = rng.choice([1, 2, 3, 4], size=len(judged))
        else:
            grades = rng.choice([-2, -1, 0, 0, 0, 1, 1, 2, 3, 4], size=len(judged))
        qrels[topic] = {str(d): int(g) for d, g in zip(judged, grades, strict=True)}
        depth = min(int(rng.choice([3, 12, 25, 60, 140])), len(pool))
        docs = rng.choice(pool, size=depth, replace=False)
        scores = rng.integers(1, 12, size=depth) * 0.25
        run[topic] = {str(d): float(s) for d, s in zip(docs, scores, strict=True)}
        for d, g in qrels[topic].items():
            for s in rng.choice([1, 2, 3], size=int(rng.integers(1, 3)), replace=False):
                grade = int(g) if rng.random() < 0.7 else int(rng.integers(-1, 3))
                sub.append((topic, int(s), d, grade))
    return run, qrels, sub


class Data:
    def __init__(self, seed: int):
        self.run, self.qrels, self.sub = generate(seed)
        self.ranking = {t: trec_order(docs) for t, docs in self.run.items()}
        self.ordered_run = {t: {d: self.run[t][d] for d in self.ranking[t]} for t in self.run}
        # renamed in rank order, for the providers that break ties otherwise
        self.name: dict[str, dict[str, str]] = {}
        for t in self.run:
            name = {d: f"r{i:05d}" for i, d in enumerate(self.ranking[t])}
            judged = list(self.qrels[t]) + [d for tt, _, d, _ in self.sub if tt == t]
            for d in judged:
                if d not in name:
                    name[d] = f"u{len(name):05d}"
            self.name[t] = name
        self.renamed_run = {t: {self.name[t][d]: self.run[t][d] for d in self.ranking[t]}
                            for t in self.run}
        # qrels in rank order, then the rest (compat's ideal keeps the qrels' order in ties)
        self.renamed_qrels = {}
        for t, judged in self.qrels.items():
            order = [d for d in self.ranking[t] if d in judged] + \
                [d for d in judged if d not in self.run[t]]
            self.renamed_qrels[t] = {self.name[t][d]: judged[d] for d in order}
        self.sub_text = "".join(f"{t} {s} {d} {g}\n" for t, s, d, g in self.sub)

    def inputs_for(self, provider: str):
        if provider in TREC_ORDER:
            return self.ordered_run, self.qrels
        return self.renamed_run, self.renamed_qrels

    def subtopic_qrels(self, renamed: bool):
        from ir_measures import Qrel

        return [Qrel(t, self.name[t][d] if renamed else d, g, str(s))
                for t, s, d, g in self.sub]


@pytest.fixture(scope="module", params=SEEDS)
def data(request) -> Data:
    return Data(request.param)


def providers():
    skip = {"runtime", "ranx", "trectools"}  # no measures of their own / not installed
    return [p for n, p in ir_measures.providers.registry.items()
            if n not in skip and p.is_available()]


def cranfield_per_topic(data: Data, names: list[str], diversity: bool = False) -> dict:
    qrels = cranfield.read_qrels(data.sub_text, diversity=True) if diversity else data.qrels
    ev = cranfield.evaluate(qrels, data.run, names)
    assert sorted(ev.per_topic) == sorted(data.run)
    return ev.per_topic


def assert_topics_match(name: str, provider: str, ours: dict, theirs: dict, topics):
    # a topic the provider reports nothing for: 0 (ir_measures' default), except Accuracy's,
    # which has no value (NaN: ir_measures' mean leaves it out, and so does Cranfield's)
    missing = math.nan if name.startswith("Accuracy") else 0.0

    def same(a, b):
        return abs(a - b) <= TOLERANCE or (math.isnan(a) and math.isnan(b))

    bad = [(t, ours[t][name], theirs.get(t, missing)) for t in topics
           if not same(ours[t][name], theirs.get(t, missing))]
    assert not bad, f"{name} vs {provider}: (topic, cranfield, oracle) {bad[:4]}"


# ---------------------------------------------------------------------------------------------
# every provider, every measure it computes
# ---------------------------------------------------------------------------------------------

def test_every_provider_measure_matches_per_topic(data):
    ours = cranfield_per_topic(data, ORACLE_NAMES)
    checked: dict[str, list[str]] = {}
    for name in ORACLE_NAMES:
        measure = ir_measures.parse_measure(name)
        for provider in providers():
            if not provider.supports(measure) or provider.NAME == "gdeval":
                continue  # gdeval: at full precision, below
            run, qrels = data.inputs_for(provider.NAME)
            theirs = {m.query_id: m.value for m in provider.iter_calc([measure], qrels, run)}
            if (name, provider.NAME) in PROVIDER_DIFFERS:
                assert any(abs(ours[t][name] - theirs.get(t, 0.0)) > TOLERANCE
                           for t in data.run), f"{name}: {provider.NAME} no longer differs"
                continue
            assert_topics_match(name, provider.NAME, ours, theirs, data.run)
            checked.setdefault(name, []).append(provider.NAME)
    gdeval_only = {n for n in ORACLE_NAMES if n.startswith(("ERR@", "nDCG(dcg="))}
    assert set(checked) | gdeval_only == set(ORACLE_NAMES)


def test_diversity_measures_match_pyndeval_per_topic(data):
    ours = cranfield_per_topic(data, DIVERSITY_NAMES, diversity=True)
    qrels = data.subtopic_qrels(renamed=True)  # pyndeval breaks ties by docid ascending
    for name in DIVERSITY_NAMES:
        measure = ir_measures.parse_measure(name)
        assert ir_measures.pyndeval.supports(measure), name
        theirs = {m.query_id: m.value
                  for m in ir_measures.pyndeval.iter_calc([measure], qrels, data.renamed_run)}
        assert_topics_match(name, "pyndeval", ours, theirs, data.run)


def gdeval_full_precision(data: Data, k: int) -> dict[str, tuple[float, float]]:
    """gdeval.pl as ir_measures ships it, its printf widened from %.5f to %.17g."""
    script = pkgutil.get_data("ir_measures", "bin/gdeval.pl").decode()
    assert script.count("%.5f,%.5f") == 1
    script = script.replace("%.5f,%.5f", "%.17g,%.17g")
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "gdeval.pl").write_text(script)
        (tmp / "qrels").write_text("".join(f"{t} 0 {d} {g}\n" for t, docs in data.qrels.items()
                                           for d, g in docs.items()))
        (tmp / "run").write_text("".join(f"{t} Q0 {d} {i + 1} {s} run\n"
                                         for t, docs in data.ordered_run.items()
                                         for i, (d, s) in enumerate(docs.items())))
        out = subprocess.check_output(["perl", str(tmp / "gdeval.pl"), str(tmp / "qrels"),
                                       str(tmp / "run"), str(k)], text=True)
    rows = [line.split(",") for line in out.splitlines()[1:] if line]
    return {topic: (float(ndcg), float(err)) for _, topic, ndcg, err in rows}


@pytest.mark.requires(shutil.which("perl") is not None, reason="perl runs gdeval.pl")
@pytest.mark.parametrize("k", [5, 10, 20])
def test_err_and_gdeval_ndcg_match_gdeval_per_topic(data, k):
    names = [f"ERR@{k}", f"nDCG(dcg='exp-log2')@{k}"]
    ours = cranfield_per_topic(data, names)
    full = gdeval_full_precision(data, k)
    for which, name in enumerate((f"nDCG(dcg='exp-log2')@{k}", f"ERR@{k}")):
        # topics gdeval prints no row for (no positive grade) count 0 in ir_measures
        assert_topics_match(name, "gdeval", ours, {t: v[which] for t, v in full.items()},
                            data.run)
        measure = ir_measures.parse_measure(name)
        printed = {m.query_id: m.value for m in ir_measures.gdeval.iter_calc(
            [measure], data.qrels, data.ordered_run)}
        for t in data.run:
            assert abs(ours[t][name] - printed.get(t, 0.0)) <= 5e-6, (name, t)


def test_num_q_matches_as_a_summary(data):
    measure = ir_measures.parse_measure("NumQ")
    theirs = ir_measures.pytrec_eval.calc_aggregate([measure], data.qrels, data.ordered_run)
    ev = cranfield.evaluate(data.qrels, data.run, ["NumQ"])
    assert ev.aggregate["NumQ"] == theirs[measure] == len(data.run)


# ---------------------------------------------------------------------------------------------
# the measures no provider computes: direct implementations from the papers
# ---------------------------------------------------------------------------------------------

def ref_err(grades: list[int], k: int | None, g_max: int = 4) -> float:
    """Chapelle et al. 2009, ERR = sum_r R_r / r prod_{i<r} (1 - R_i), R = (2^g - 1)/2^g_max
    (gdeval's g_max = 4); without k, the whole ranking."""
    total, keep = 0.0, 1.0
    for r, g in enumerate(grades[:k] if k else grades, 1):
        stop = min(1.0, (2 ** g - 1) / 2 ** g_max) if g > 0 else 0.0
        total += keep * stop / r
        keep *= 1 - stop
    return total


def ref_rbp(gains: list[float], p: float, k: int | None) -> float:
    """Moffat & Zobel 2008, RBP = (1 - p) sum_i g_i p^(i-1), over cwl_eval's 1000 ranks, its
    weights normalised over them (divided by 1 - p^1000)."""
    depth = min(k or 1000, 1000)
    return sum(g * (1 - p) * p ** (i - 1) for i, g in enumerate(gains[:depth], 1)) / \
        (1 - p ** 1000)


def test_measures_without_a_provider_match_direct_implementations(data):
    names = DIRECT_NAMES[:5]
    ours = cranfield_per_topic(data, names)
    for t, ranking in data.ranking.items():
        grades = [data.qrels[t].get(d, 0) for d in ranking]
        top = max([g for g in data.qrels[t].values()] + [1])
        graded = [g / top if g > 0 else 0.0 for g in grades]
        binary2 = [1.0 if g >= 2 else 0.0 for g in grades]
        expected = {"ERR": ref_err(grades, None), "RBP": ref_rbp(graded, 0.8, None),
                    "RBP(p=0.9)": ref_rbp(graded, 0.9, None), "RBP@10": ref_rbp(graded, 0.8, 10),
                    "RBP(rel=2)@5": ref_rbp(binary2, 0.8, 5)}
        for name, value in expected.items():
            assert abs(ours[t][name] - value) <= TOLERANCE, (name, t, ours[t][name], value)


def ref_diversity(ranking: list[str], judgments: dict[str, dict[int, int]], alpha: float,
                  rel: int = 1) -> dict[str, float]:
    """The diversity measures over the whole ranking, from the papers: g(r) = sum_j
    rel_j(r) (1 - alpha)^c_j(r) (Clarke et al. 2008), c_j(r) the documents above r relevant
    to subtopic j; alpha_DCG = sum_r g(r)/log2(r+1) and ERR_IA = sum_r g(r)/r (Chapelle et
    al. 2011), each over S sum_{r>=1} (1-alpha)^(r-1) d(r), S the subtopics with a relevant
    document (the "ideal ideal" summed over every rank); alpha_nDCG and nERR_IA over the same
    sums for the greedy ideal ranking (each step the judged document of largest g, ties to the
    larger docno, as ndeval); P_IA = (1/S) sum_j (1/N) #{r : rel_j(r)}; StRecall = the share
    of the S subtopics the ranking covers. S = 0 gives 0."""
    relevant = {d: {j for j, g in subs.items() if g >= rel} for d, subs in judgments.items()}
    subtopics = set().union(*relevant.values()) if relevant else set()
    S = len(subtopics)
    if S == 0 or not ranking:
        return dict.fromkeys(("alpha_DCG", "ERR_IA", "alpha_nDCG", "nERR_IA", "P_IA",
                              "StRecall"), 0.0)

    def gains(docs):
        seen: dict[int, int] = {}
        out = []
        for d in docs:
            out.append(sum((1 - alpha) ** seen.get(j, 0) for j in relevant.get(d, ())))
            for j in relevant.get(d, ()):
                seen[j] = seen.get(j, 0) + 1
        return out

    # greedy ideal over every judged document
    left, ideal, seen = sorted(judgments, reverse=True), [], {}
    while left:
        best = max(left, key=lambda d: sum((1 - alpha) ** seen.get(j, 0)
                                           for j in relevant[d]))  # first max: larger docno
        ideal.append(best)
        left.remove(best)
        for j in relevant[best]:
            seen[j] = seen.get(j, 0) + 1
    g, gi = gains(ranking), gains(ideal)
    dcg = sum(x / math.log2(r + 1) for r, x in enumerate(g, 1))
    err = sum(x / r for r, x in enumerate(g, 1))
    idcg = sum(x / math.log2(r + 1) for r, x in enumerate(gi, 1))
    ierr = sum(x / r for r, x in enumerate(gi, 1))
    ii_err = -math.log(alpha) / (1 - alpha) if alpha < 1 else 1.0
    ii_dcg = math.fsum((1 - alpha) ** (r - 1) / math.log2(r + 1) for r in range(1, 200_001))
    covered = set().union(*(relevant.get(d, set()) for d in ranking))
    return {"alpha_DCG": dcg / (S * ii_dcg), "ERR_IA": err / (S * ii_err),
            "alpha_nDCG": dcg / idcg if dcg else 0.0, "nERR_IA": err / ierr if dcg else 0.0,
            "P_IA": sum(len(relevant.get(d, ())) for d in ranking) / (S * len(ranking)),
            "StRecall": len(covered) / S}


def test_diversity_measures_without_a_cutoff_match_direct_implementations(data):
    names = DIRECT_NAMES[5:]
    ours = cranfield_per_topic(data, names, diversity=True)
    for t, ranking in data.ranking.items():
        judgments: dict[str, dict[int, int]] = {}
        for tt, s, d, g in data.sub:
            if tt == t:
                judgments.setdefault(d, {})[s] = g
        expected = ref_diversity(ranking, judgments, 0.5)
        for name in names:
            assert abs(ours[t][name] - expected[name]) <= TOLERANCE, \
                (name, t, ours[t][name], expected[name])


def test_accuracy_zero_over_zero_rules():
    """ir_measures' accuracy provider divides by zero when the top k holds no non-relevant
    document (it raises); Cranfield scores that 1 (no pair is misordered) and a top k
    without a relevant document has no value (NaN), as ir_measures reports none."""
    run = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    qrels = {"q": {"a": 1, "b": 2, "c": 0}}
    ev = cranfield.evaluate(qrels, run, ["Accuracy@2", "Accuracy", "Accuracy(rel=3)"])
    got = ev.per_topic["q"]
    assert got["Accuracy@2"] == 1.0 and got["Accuracy"] == 1.0
    assert math.isnan(got["Accuracy(rel=3)"]) and math.isnan(ev.aggregate["Accuracy(rel=3)"])
    assert list(ir_measures.accuracy.iter_calc([ir_measures.parse_measure("Accuracy(rel=3)")],
                                               qrels, run)) == []
    measure = ir_measures.parse_measure("Accuracy@2")
    with pytest.raises(ZeroDivisionError):
        list(ir_measures.accuracy.iter_calc([measure], qrels, run))


# ---------------------------------------------------------------------------------------------
# the registry: every name and alias resolves, and the test covers every measure
# ---------------------------------------------------------------------------------------------

def example(name: str, measure) -> str:
    """A complete spelling of a registry measure: its required parameters filled in."""
    params = measure.SUPPORTED_PARAMS
    args = "(max_rel=4)" if params.get("max_rel") and params["max_rel"].required else ""
    if "recall" in params and params["recall"].required:
        return f"{name}{args}@0.5"
    cutoff = params.get("cutoff")
    return f"{name}{args}@10" if cutoff is not None and cutoff.required else f"{name}{args}"


def test_every_registry_name_and_alias_resolves():
    for name, measure in ir_measures.measures.registry.items():
        spelled = example(name, measure)
        canonical = example(measure.NAME, measure)
        ours = parse_measure(spelled)
        assert len(ours) == 1, spelled
        if name != measure.NAME and name not in ("SetRelP", "NumRelRet"):
            # an alias: the same measure as the name it stands for
            same = parse_measure(canonical)
            assert (ours[0].measure, ours[0].value) == (same[0].measure, same[0].value), name


def test_the_oracle_test_covers_every_registry_measure():
    covered = {ir_measures.parse_measure(n).NAME
               for n in ORACLE_NAMES + DIVERSITY_NAMES + ["NumQ"]}
    covered |= {ir_measures.parse_measure(n).NAME for n in DIRECT_NAMES}
    assert covered >= {m.NAME for m in ir_measures.measures.registry.values()}


def test_the_engine_never_imports_the_oracles():
    import subprocess
    import sys

    code = ("import sys, cranfield, cranfield.cli, cranfield.compare.comparison; "
            "cranfield.evaluate({'q': {'d': 1}}, {'q': {'d': 1.0}}, ['RBP', 'BPM(max_rel=2)@5', "
            "'Compat', 'ERR@5']); "
            "bad = [m for m in ('ir_measures', 'pyndeval', 'cwl', 'pytrec_eval') "
            "if m in sys.modules]; print(bad)")
    out = subprocess.check_output([sys.executable, "-c", code], text=True)
    assert out.strip() == "[]"
