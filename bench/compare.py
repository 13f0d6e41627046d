"""Benchmark comparing systems: ``cranfield.compare.compare_evaluations`` on the issue's workload.

Default workload: 10 runs × 6,980 topics (100 docs each), 5 measures (map, ndcg_cut.10, P.10,
recall.100, recip_rank), all 45 pairs, paired t-test + randomization test (10,000 sign
vectors) + bootstrap (10,000 samples), Holm over the 225 measure × pair comparisons: what
``cranfield compare`` does after evaluating the runs.

The data are synthetic and seeded: qrels with 1–5 judged docs per topic (grades 0–2, at
least one relevant), and runs ranking 100 of a 150-doc pool per topic by a noisy score in
which judged relevant docs get a boost = run quality + topic difficulty (shared by the runs,
so the pairs are correlated as real systems are) + per run-topic noise. Runs 2k and 2k+1
share a quality level, so some pairs differ significantly and some do not.

Timed: evaluating the runs once (``cranfield.evaluate`` on column-built Runs), then
``compare_evaluations`` (median of ``--repeat``), and its parts on the same
``(n_topics, n_measures · n_pairs)`` difference matrix: ``stats.t_test``,
``stats.randomization_test``, ``stats.bootstrap_test``, the last two on one column to show
the batching (a per-column loop would cost n_columns × one column), and the rest of the
comparison (``compare_evaluations`` with ``tests=()``); the repeats are interleaved, so every
figure sees the same load, and each is a median over ``--repeat``. Memory: the process's
peak RSS (``VmHWM``, reset before each phase where Linux allows, else ``ru_maxrss``) and the
tracemalloc peak of one (untimed, warm-up) comparison. If ranx is installed,
``ranx.compare`` is timed as an anchor (see ``--ranx-permutations``).

``--budget [WORK]`` instead measures the largest comparisons a work budget allows (default:
the service's MAX_COMPARISON_WORK; the work is
``cranfield.compare.comparison_work.comparison_work``). Each of a few shapes — the issue's 10 runs ×
30 topics with as many resamples as fit, one column of bootstrap over many topics (the dearest unit
of work), many columns, per-topic output over MAX_TOPICS topics (the most memory), Wilcoxon on as
many columns as fit, the default resamples over as many topics as fit — is scaled up to the budget
and run in a fresh subprocess (``--child``), which generates and evaluates its runs, then measures
``compare_evaluations(..., max_work=budget)`` plus ``orjson.dumps`` of the document (what
the service does with it): wall and CPU time, and peak RSS above idle, read from
/proc/self/status (VmRSS just before, after gc and malloc_trim; VmHWM after, reset through
/proc/self/clear_refs just before), so neither data generation nor the parent's memory
counts.

    python bench/compare.py
    python bench/compare.py --runs 4 --topics 1000 --permutations 1000 --repeat 5
    python bench/compare.py --budget
"""

from __future__ import annotations

import sys

# Run as a script, this file's folder leads sys.path, where bench/queue.py and bench/http.py
# would shadow the standard library's queue and http for everything imported later: drop it.
if sys.path and sys.path[0] == __import__("os").path.dirname(__file__):
    sys.path.pop(0)

import argparse
import gc
import importlib.util
import json
import os
import platform
import resource
import statistics
import subprocess
import time
import tracemalloc
import warnings

import numpy as np

import cranfield
from cranfield.compare import stats
from cranfield.compare.comparison import compare_evaluations
from cranfield.compare.comparison_work import comparison_work

MEASURES = ["map", "ndcg_cut.10", "P.10", "recall.100", "recip_rank"]
MEASURES_RANX = ["map", "ndcg@10", "precision@10", "recall@100", "mrr"]
DOCS_PER_TOPIC = 100
POOL_PER_TOPIC = 150
TESTS = ("t", "randomization", "bootstrap")


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------

def make_data(n_runs: int, n_topics: int, seed: int, docs: int = DOCS_PER_TOPIC):
    """Seeded qrels ({topic: {docid: grade}}) and column-built runs ({name: cranfield.Run}),
    ``docs`` (≤ 150) ranked documents per topic."""
    rng = np.random.default_rng(seed)
    width = len(str(n_topics))
    topics = [f"{i + 1:0{width}d}" for i in range(n_topics)]  # byte order = numeric order
    pool = np.array([f"D{i:08d}" for i in range(n_topics * POOL_PER_TOPIC)],
                    dtype=object).reshape(n_topics, POOL_PER_TOPIC)
    n_judged = rng.integers(1, 6, n_topics)
    judged = np.arange(POOL_PER_TOPIC) < n_judged[:, None]
    grades = rng.choice(3, size=(n_topics, POOL_PER_TOPIC), p=[0.35, 0.45, 0.2])
    grades[:, 0] = np.maximum(grades[:, 0], 1)  # every topic has a relevant doc
    grades = np.where(judged, grades, 0)
    qrels = {topics[t]: {pool[t, k]: int(grades[t, k]) for k in range(int(n_judged[t]))}
             for t in range(n_topics)}
    difficulty = rng.normal(0.0, 0.6, (n_topics, 1))
    topic_index = np.repeat(np.arange(n_topics, dtype=np.int32), docs)
    rows = np.arange(n_topics)[:, None]
    runs = {}
    for r in range(n_runs):
        run_rng = np.random.default_rng((seed, r + 1))
        quality = 1.0 + 0.1 * (r // 2)
        boost = quality + difficulty + run_rng.normal(0.0, 0.4, (n_topics, 1))
        scores = run_rng.standard_normal((n_topics, POOL_PER_TOPIC)) + grades * boost
        top = np.argpartition(-scores, docs - 1, axis=1)[:, :docs]
        top = np.take_along_axis(top, np.argsort(-scores[rows, top], axis=1), axis=1)
        name = f"run{r:02d}"
        runs[name] = cranfield.Run(topics, topic_index, pool[rows, top].ravel(),
                                   np.round(scores[rows, top].ravel(), 6), name, name)
    return qrels, runs


# --------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------

def timed(fn, repeat: int) -> tuple[float, object]:
    """Median seconds of ``repeat`` calls, and the last result."""
    seconds, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), result


def _reset_peak() -> bool:
    """Reset this process's VmHWM (Linux ≥ 4.0); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def _rss_mb(field: str) -> float:
    """VmHWM (peak) or VmRSS (current) in MB; ru_maxrss where /proc is missing."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6


def diff_matrix(evaluations: dict, measure_keys: list[str]) -> np.ndarray:
    """The (n_topics, n_measures · n_pairs) matrix compare_evaluations tests: measure-major
    columns of b − a over the pairs i < j (every run here has every topic, in one order)."""
    evs = list(evaluations.values())
    order = evs[0].topic_order
    assert all(ev.topic_order == order for ev in evs), "runs must share their topics"
    values = np.stack([[np.asarray(ev.values[k], dtype=np.float64) for ev in evs]
                       for k in measure_keys])
    pairs = [(a, b) for a in range(len(evs)) for b in range(a + 1, len(evs))]
    a_idx, b_idx = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    diffs = (values[:, b_idx, :] - values[:, a_idx, :]).reshape(-1, len(order))
    return np.asfortranarray(diffs.T)


def ranx_anchor(args, qrels: dict, runs: dict, measured: dict) -> list[tuple[str, str, str]]:
    """Rows timing ranx.compare on the same data, or one row saying why not."""
    if args.no_ranx:
        return [("ranx", "-", "skipped (--no-ranx)")]
    if importlib.util.find_spec("ranx") is None:
        return [("ranx", "-", "not installed (pip install -e .[bench])")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's type-safety warnings from inside ranx
        return _ranx_rows(args, qrels, runs, measured)


def _ranx_rows(args, qrels: dict, runs: dict, measured: dict) -> list[tuple[str, str, str]]:
    import ranx

    def as_dict(run) -> dict:
        bounds = np.searchsorted(run.topic_index, np.arange(len(run.topics) + 1))
        docids, scores = run.docids.tolist(), run.scores.tolist()
        return {t: dict(zip(docids[s:e], scores[s:e], strict=True))
                for t, s, e in zip(run.topics, bounds[:-1].tolist(), bounds[1:].tolist(),
                                   strict=True)}

    names = list(runs)[:2]
    # Not timed: building ranx's inputs (cranfield's Runs are likewise built beforehand).
    # Only two runs: ranx tests one pair and metric at a time, so the whole workload is
    # extrapolated from them (evaluation per run, permutation test per ordered pair × metric).
    r_qrels = ranx.Qrels(qrels)
    r_runs = [ranx.Run(as_dict(runs[n]), name=n) for n in names]
    # Warm numba up (JIT or cache load) on a slice of the same data, both tests.
    warm = set(list(qrels)[:20])
    warm_qrels = ranx.Qrels({t: qrels[t] for t in warm})
    warm_runs = [ranx.Run({t: d for t, d in as_dict(runs[n]).items() if t in warm}, name=n)
                 for n in names]
    for test in ("student", "fisher"):
        ranx.compare(warm_qrels, warm_runs, MEASURES_RANX, stat_test=test, n_permutations=10)

    def compare(test, perms=1000):
        return lambda: ranx.compare(r_qrels, r_runs, MEASURES_RANX, stat_test=test,
                                    n_permutations=perms, max_p=args.alpha,
                                    random_seed=args.seed)

    k = min(args.permutations, args.ranx_permutations)
    student, _ = timed(compare("student"), 1)
    fisher, _ = timed(compare("fisher", k), 1)
    # ranx tests every ordered pair (control, treatment), one metric at a time
    per_unit = max(fisher - student, 0.0) / (2 * len(MEASURES) * k / 1000)
    ordered = args.runs * (args.runs - 1)
    full = student * args.runs / 2 + per_unit * ordered * len(MEASURES) * args.permutations / 1000
    ours = measured["evaluate"] + measured["compare"]
    rows = [
        ("ranx.compare, student, 2 runs", f"{student:.2f}",
         f"evaluates 2 runs + 2 ordered-pair t-tests × {len(MEASURES)} measures"),
        (f"ranx.compare, fisher {k:,} perms, 2 runs", f"{fisher:.2f}",
         f"per ordered pair × measure per 1,000 perms: {per_unit * 1e3:.0f} ms "
         f"(cranfield per column: {measured['per_col_1k'] * 1e3:.2f} ms)"),
        (f"ranx.compare, fisher {args.permutations:,} perms, {args.runs} runs", f"≈{full:.0f}",
         f"extrapolated: student × {args.runs}/2 + {ordered} ordered pairs × "
         f"{len(MEASURES)} fisher; ≈{full / ours:.0f}× cranfield's evaluate + compare"),
    ]
    return rows


# --------------------------------------------------------------------------------------------
# --budget: the largest comparisons a work budget allows
# --------------------------------------------------------------------------------------------

MEASURES_10 = MEASURES + ["ndcg", "bpref", "Rprec", "num_rel_ret", "iprec_at_recall.0.10"]


def _pairs(runs: int) -> int:
    return runs * (runs - 1) // 2


def _largest(fits, low: int, high: int) -> int:
    """The largest x in [low, high] with fits(x) (fits is monotone; low must fit)."""
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(mid) else (low, mid - 1)
    return low


def budget_shapes(budget: int, max_topics: int) -> list[dict]:
    """A few comparisons, each as large as ``budget`` allows along one axis."""
    shapes = []

    def work(runs, measures, topics, tests, perms, samples) -> int:
        return comparison_work(_pairs(runs), measures, topics, tests, perms, samples).total

    # the shape (10 runs × 30 topics), as many permutations and bootstrap samples as fit
    r = _largest(lambda x: work(10, 5, 30, TESTS, x, x) <= budget, 100, 10**6)
    shapes.append({"label": "issue: 10 runs × 5 measures × 30 topics, P = B max", "runs": 10,
                   "measures": 5, "topics": 30, "tests": TESTS, "perms": r, "samples": r})
    # one column, the dearest unit (bootstrap draws dominate): 1,500 topics, B max
    tests = ("t", "bootstrap")
    r = _largest(lambda x: work(2, 1, 1500, tests, 0, x) <= budget, 100, 10**6)
    shapes.append({"label": "1 column × 1,500 topics, bootstrap only, B max", "runs": 2,
                   "measures": 1, "topics": 1500, "tests": tests, "perms": 100, "samples": r})
    # many columns: 50 runs × 10 measures = 12,250 columns, 30 topics, P = B max
    r = _largest(lambda x: work(50, 10, 30, TESTS, x, x) <= budget, 0, 10**6)
    if r >= 100:
        shapes.append({"label": "50 runs × 10 measures × 30 topics, P = B max", "runs": 50,
                       "measures": 10, "topics": 30, "tests": TESTS, "perms": r,
                       "samples": r})
    # per-topic output: 2 runs × 10 measures, t-test only, as many topics as fit
    t = _largest(lambda x: work(2, 10, x, ("t",), 0, 0) <= budget, 1, max_topics)
    shapes.append({"label": f"2 runs × 10 measures, t only, per_topic, {t:,} topics",
                   "runs": 2, "measures": 10, "topics": t, "tests": ("t",), "perms": 100,
                   "samples": 100, "docs": 10})
    # Wilcoxon (cranfield.compare.stats, a call per column) on as many columns as fit: runs × 10
    # measures
    tests = ("t", "wilcoxon")
    r = _largest(lambda x: work(x, 10, 30, tests, 0, 0) <= budget, 2, 50)
    shapes.append({"label": f"{r} runs × 10 measures × 30 topics, Wilcoxon", "runs": r,
                   "measures": 10, "topics": 30, "tests": tests, "perms": 100,
                   "samples": 100})
    # the API's defaults (10,000 + 10,000) for 10 runs × 5 measures over as many topics as fit
    t = _largest(lambda x: work(10, 5, x, TESTS, 10**4, 10**4) <= budget, 17, max_topics)
    shapes.append({"label": f"10 runs × 5 measures × {t:,} topics, defaults (10^4 + 10^4)",
                   "runs": 10, "measures": 5, "topics": t, "tests": TESTS, "perms": 10**4,
                   "samples": 10**4, "docs": 20})
    for shape in shapes:
        shape["work"] = work(shape["runs"], shape["measures"], shape["topics"], shape["tests"],
                             shape["perms"], shape["samples"])
        shape["budget"] = budget
    return shapes


def _trim() -> None:
    """Give freed memory back to the system (glibc), so that RSS is what is held."""
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def run_shape(shape: dict, seed: int = 0) -> dict:
    """In this (fresh) process: make and evaluate the shape's runs, then measure one
    comparison of them as the service makes it (per-topic scores and curves included) and its
    JSON: seconds, CPU seconds, and peak RSS above what was held before."""
    import orjson

    measures = (MEASURES_10 if shape["measures"] > len(MEASURES) else MEASURES)
    measures = measures[:shape["measures"]]
    qrels, runs = make_data(shape["runs"], shape["topics"], seed,
                            shape.get("docs", DOCS_PER_TOPIC))
    qrels_obj = cranfield.read_qrels(qrels)
    evaluations = {name: cranfield.evaluate(qrels_obj, run, measures)
                   for name, run in runs.items()}
    del qrels, runs, qrels_obj
    _trim()
    idle = _rss_mb("VmRSS")
    can_reset = _reset_peak()
    started, cpu = time.perf_counter(), time.process_time()
    doc = compare_evaluations(evaluations, measures, tests=tuple(shape["tests"]),
                              n_permutations=shape["perms"], n_samples=shape["samples"],
                              seed=seed, largest_losses=shape.get("losses", 5),
                              per_topic=True, curves=True, max_work=shape["budget"])
    body = orjson.dumps(doc)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"wall": wall, "cpu": cpu, "idle_mb": idle, "peak_mb": _rss_mb("VmHWM") - idle,
            "resettable": can_reset, "columns": len(doc["pairs"]), "body_mb": len(body) / 1e6}


def budget_main(budget: int, seed: int) -> int:
    from backend.config import APP_DEFAULTS as DEFAULTS

    if budget < 0:
        budget = DEFAULTS["MAX_COMPARISON_WORK"]
    shapes = budget_shapes(budget, DEFAULTS["MAX_TOPICS"])
    print(f"largest comparisons a budget of {budget:,} units allows (comparison_work; "
          f"compare_evaluations + orjson.dumps, per_topic and curves on, each in a fresh "
          f"process); {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}")
    print(f"{'shape':62}  {'work':>14}  {'wall s':>6}  {'cpu s':>6}  {'peak MB':>7}")
    worst_wall = worst_peak = 0.0
    for shape in shapes:
        child = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--seed", str(seed), "--child",
             json.dumps(shape)], capture_output=True, text=True,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        if child.returncode:
            print(f"{shape['label']:62}  failed: {child.stderr.strip().splitlines()[-1:]}")
            continue
        out = json.loads(child.stdout.strip().splitlines()[-1])
        worst_wall, worst_peak = max(worst_wall, out["wall"]), max(worst_peak, out["peak_mb"])
        flag = "" if out["resettable"] else " (VmHWM not resettable: includes set-up)"
        print(f"{shape['label']:62}  {shape['work']:>14,}  {out['wall']:>6.2f}  "
              f"{out['cpu']:>6.2f}  {out['peak_mb']:>7.0f}{flag}")
    print(f"largest allowed: at most {worst_wall:.2f} s wall and {worst_peak:.0f} MB peak RSS "
          "above idle (idle: the process holding its evaluations, before comparing)")
    return 0


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--topics", type=int, default=6980)
    parser.add_argument("--permutations", type=int, default=10000)
    parser.add_argument("--bootstrap", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--ranx-permutations", type=int, default=1000,
                        help="ranx.compare is timed on the first 2 runs, its fisher test with "
                             "this many permutations, and extrapolated (default 1000)")
    parser.add_argument("--no-ranx", action="store_true", help="skip the ranx anchor")
    parser.add_argument("--budget", nargs="?", type=int, const=-1, default=None,
                        metavar="WORK", help="measure the largest comparisons this work "
                        "budget allows instead (default: the service's MAX_COMPARISON_WORK)")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # one --budget shape, as JSON
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_shape(json.loads(args.child))))
        return 0
    if args.budget is not None:
        return budget_main(args.budget, args.seed)
    if args.runs < 2 or args.topics < 1 or args.repeat < 1:
        parser.error("need --runs ≥ 2, --topics ≥ 1, --repeat ≥ 1")

    n_pairs = args.runs * (args.runs - 1) // 2
    n_cols = n_pairs * len(MEASURES)
    print(f"cranfield compare benchmark: {args.runs} runs × {args.topics:,} topics × "
          f"{DOCS_PER_TOPIC} docs, {len(MEASURES)} measures ({' '.join(MEASURES)}), "
          f"{n_pairs} pairs = {n_cols} columns; t + randomization ({args.permutations:,}) + "
          f"bootstrap ({args.bootstrap:,}), Holm; seed {args.seed}, median of {args.repeat}")
    print(f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} cpus, "
          f"load average {os.getloadavg()[0]:.1f} (timings on a busy machine are noisy)")

    started = time.perf_counter()
    qrels, runs = make_data(args.runs, args.topics, args.seed)
    generate = time.perf_counter() - started
    peak_data = _rss_mb("VmHWM")

    can_reset = _reset_peak()
    started = time.perf_counter()
    qrels_obj = cranfield.read_qrels(qrels)
    evaluations = {name: cranfield.evaluate(qrels_obj, run, MEASURES)
                   for name, run in runs.items()}
    evaluate = time.perf_counter() - started
    peak_eval = _rss_mb("VmHWM")

    def compare():
        return compare_evaluations(evaluations, MEASURES, tests=TESTS, alpha=args.alpha,
                                   n_permutations=args.permutations,
                                   n_samples=args.bootstrap, seed=args.seed)

    # Warm-up call (untimed): its peak RSS and tracemalloc peak are the comparison's memory.
    held = _rss_mb("VmRSS")
    _reset_peak()
    tracemalloc.start()
    doc = compare()
    traced_peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    peak_compare = _rss_mb("VmHWM")

    diffs = diff_matrix(evaluations, [m["key"] for m in doc["measures"]])
    one = np.asfortranarray(diffs[:, :1])
    # Interleaved, so that every figure sees the same load on a shared machine.
    steps = {
        "compare": compare,
        "rest": lambda: compare_evaluations(evaluations, MEASURES, tests=(), alpha=args.alpha),
        "t": lambda: stats.t_test(diffs),
        "rand": lambda: stats.randomization_test(diffs, args.permutations, args.seed),
        "boot": lambda: stats.bootstrap_test(diffs, args.bootstrap, args.seed),
        "rand1": lambda: stats.randomization_test(one, args.permutations, args.seed),
        "boot1": lambda: stats.bootstrap_test(one, args.bootstrap, args.seed),
    }
    seconds: dict[str, list[float]] = {key: [] for key in steps}
    results = {}
    for _ in range(args.repeat):
        for key, fn in steps.items():
            started = time.perf_counter()
            results[key] = fn()
            seconds[key].append(time.perf_counter() - started)
    t_compare, rest, t_t, t_rand, t_boot, t_rand1, t_boot1 = (
        statistics.median(seconds[key]) for key in steps)
    rand, boot = results["rand"], results["boot"]

    per_1k = t_rand / (args.permutations / 1000)
    per_col_1k = per_1k / n_cols
    boot_per_1k = t_boot / (args.bootstrap / 1000)

    rows = [
        ("generate data (not part of compare)", f"{generate:.2f}",
         f"{sum(len(r) for r in runs.values()):,} run rows, "
         f"{sum(len(d) for d in qrels.values()):,} judgments"),
        (f"evaluate {args.runs} runs (once)", f"{evaluate:.2f}",
         "read_qrels(mapping) + cranfield.evaluate(Run from columns) per run"),
        ("compare_evaluations", f"{t_compare:.2f}",
         f"{n_cols} columns, 3 tests, Holm, {n_cols} pair dicts"),
        ("  stats.t_test", f"{t_t:.3f}", f"({args.topics}, {n_cols}) diff matrix"),
        ("  stats.randomization_test", f"{t_rand:.2f}",
         f"per 1,000 perms: {per_1k * 1e3:.0f} ms; per column per 1,000: "
         f"{per_col_1k * 1e3:.2f} ms"),
        ("  stats.bootstrap_test", f"{t_boot:.2f}",
         f"per 1,000 samples: {boot_per_1k * 1e3:.0f} ms; per column per 1,000: "
         f"{boot_per_1k / n_cols * 1e3:.2f} ms"),
        ("  the rest: compare_evaluations(tests=())", f"{rest:.2f}",
         "summary CIs, d_z, W/T/L, largest losses, pair dicts"),
        ("randomization_test, 1 column", f"{t_rand1:.2f}",
         f"all {n_cols} columns cost {t_rand / t_rand1:.1f}× this (a loop: {n_cols}×)"),
        ("bootstrap_test, 1 column", f"{t_boot1:.2f}",
         f"all {n_cols} columns cost {t_boot / t_boot1:.1f}× this (a loop: {n_cols}×)"),
        ("evaluate + compare", f"{evaluate + t_compare:.2f}", "≈ `cranfield compare` minus "
         "reading files"),
    ]
    measured = {"evaluate": evaluate, "compare": t_compare, "per_col_1k": per_col_1k}
    rows += ranx_anchor(args, qrels, runs, measured)

    width = max(len(r[0]) for r in rows)
    print()
    print(f"{'step':{width}}  {'median s':>8}  detail")
    print("-" * (width + 60))
    for label, seconds, detail in rows:
        print(f"{label:{width}}  {seconds:>8}  {detail}")

    print()
    how = "VmHWM, reset per phase" if can_reset else "ru_maxrss/VmHWM, not resettable"
    print(f"memory ({how}): peak {peak_data:.0f} MB after generating, {peak_eval:.0f} MB "
          f"evaluating, {peak_compare:.0f} MB comparing (+{peak_compare - held:.0f} MB over "
          f"the {held:.0f} MB held); tracemalloc peak of one comparison {traced_peak:.0f} MB")
    if n_cols >= 8:
        ratio = max(t_rand / t_rand1, t_boot / t_boot1)
        verdict = "yes" if ratio < n_cols / 4 else "NO (close to a per-column loop)"
        print(f"vectorised: {verdict} ({n_cols} columns cost at most {ratio:.1f}× one column)")
    same = all(np.allclose([p[key]["p_value"] for p in doc["pairs"]], res.p_value)
               for key, res in (("randomization", rand), ("bootstrap", boot)))
    counts = {key: sum(p[key]["significant"] for p in doc["pairs"])
              for key in ("t_test", "randomization", "bootstrap")}
    pairs_sig = len({(p["a"], p["b"]) for p in doc["pairs"] if p["randomization"]["significant"]})
    print(f"sanity: significant at alpha {args.alpha} after Holm, of {n_cols} measure × pair "
          f"comparisons: t {counts['t_test']}, randomization {counts['randomization']}, "
          f"bootstrap {counts['bootstrap']}; run pairs with ≥1 significant measure "
          f"(randomization): {pairs_sig}/{n_pairs}; parts reproduce compare's p-values: "
          f"{'yes' if same else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
