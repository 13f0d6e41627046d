"""The engine benchmark's mapping tools and ranx (issue #30), called by ``engine.py``.

Workers (one fresh process per repeat, see ``engine.py``), each timing wall and CPU seconds:

* ``cranfield-maps`` / ``pytrec-maps``: ``cranfield.evaluate(qrels, run, m)`` and
  ``pytrec_eval.RelevanceEvaluator(qrels, m).evaluate(run)`` on plain dicts (pickled).
* ``cranfield-maps-dd`` / ``pytrec-maps-dd``: the same on what ``pytrec_eval.parse_run`` and
  ``parse_qrel`` return (``collections.defaultdict(dict)`` of dicts), parsed once from the
  dataset's files and pickled beside them (a pickle keeps the defaultdict).
* ``ranx``: ``import ranx``, the numba warm-up (JIT, or loading numba's on-disk cache from
  ``NUMBA_CACHE_DIR``: "cold" when that folder held no index before the worker started,
  "warm" otherwise), ``Qrels``/``Run`` construction and ``evaluate`` are timed apart; the
  table's time is construction + evaluate.

The driver side makes the defaultdict pickles, prints ranx's breakdown and the issue's
mapping and memory checks: mappings from plain dicts and from parsed defaultdicts against
pytrec_eval's ``evaluate()`` in the same run (>= 8x at M, >= 3x at L) and ``cranfield eval``'s
peak RSS at L against the trec_eval binary's, with its path and version.
"""

from __future__ import annotations

import os
import pickle
import statistics
from pathlib import Path

from engine_proc import (
    CORES,
    Clock,
    cranfield_map,
    current_rss_mb,
    import_cranfield,
    load_pickle,
    peak_rss_mb,
    pytrec_map,
)

FIVE = ["map", "ndcg_cut.10", "P.10", "recall.100", "recip_rank"]
FIVE_RANX = ["map", "ndcg@10", "precision@10", "recall@100", "mrr"]
WORKER_TOOLS = ("cranfield-maps", "cranfield-maps-dd", "pytrec-maps", "pytrec-maps-dd", "ranx")
#: Issue #30: cranfield on mappings against pytrec_eval's evaluate(), minimum ratio per scale.
MAPPING_TARGETS = {"M": 8.0, "L": 3.0}
#: (cranfield tool, pytrec_eval tool, what the mappings are)
MAPPING_PAIRS = (("cranfield-maps", "pytrec-maps", "plain dicts"),
                 ("cranfield-maps-dd", "pytrec-maps-dd", "pytrec_eval's parsed defaultdicts"))


# --------------------------------------------------------------------------- worker side


def run_tool(tool: str, measure_set: str, paths: dict[str, str], measures: list[str]) -> dict:
    """Time one mapping tool or ranx once in this (fresh) process; ``measures`` are
    cranfield's names of the set (pytrec_eval's are the five or ``supported_measures``)."""
    if tool == "ranx":
        return _ranx(measure_set, paths)
    dd = tool.endswith("-dd")
    run = load_pickle(paths["run_dd_pickle" if dd else "run_pickle"])
    qrels = load_pickle(paths["qrels_dd_pickle" if dd else "qrels_pickle"])
    extra: dict = {}
    if tool.startswith("cranfield"):
        cranfield = import_cranfield()
        base = current_rss_mb()
        with Clock() as clock:
            result = cranfield.evaluate(qrels, run, measures)
            _ = result.per_topic  # the {topic: {measure: value}} dicts, as pytrec_eval builds
        extra["map"] = cranfield_map(result)
        peak = peak_rss_mb()
        result = None
        # what part of it is reading the two mappings, measured again after the timed call
        with Clock() as reading:
            cranfield.read_run(run)
            cranfield.read_qrels(qrels)
        extra["read_seconds"] = reading.wall
    else:
        import pytrec_eval

        measures = set(FIVE) if measure_set == "five" else set(pytrec_eval.supported_measures)
        base = current_rss_mb()
        with Clock() as clock:
            evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures)
            with Clock() as evaluating:
                result = evaluator.evaluate(run)
        extra.update(evaluate_seconds=evaluating.wall, evaluate_cpu=evaluating.cpu,
                     map=pytrec_map(result))
        peak = peak_rss_mb()
    extra.update(cpu_seconds=clock.cpu, load=clock.load)
    return {"seconds": clock.wall, "peak_mb": peak, "base_mb": base, "extra": extra}


def _ranx(measure_set: str, paths: dict[str, str]) -> dict:
    if measure_set != "five":
        return {"skipped": "ranx has no all_trec equivalent"}
    cache = paths.get("numba_cache_dir")
    state = "default"
    if cache:
        os.environ["NUMBA_CACHE_DIR"] = cache  # read when numba is first imported
        state = "warm" if any(Path(cache).rglob("*.nbi")) else "cold"
    with Clock() as importing:
        import ranx
    run = load_pickle(paths["run_pickle"])
    qrels = load_pickle(paths["qrels_pickle"])
    # numba's warm-up (JIT or cache load) on a slice of the same data: a toy input of other
    # shapes would leave code paths to compile inside the timed call
    with Clock() as warming:
        topics = list(qrels)[:3]
        ranx.evaluate(ranx.Qrels({t: dict(qrels[t]) for t in topics}),
                      ranx.Run({t: dict(run[t]) for t in topics}), FIVE_RANX)
    base = current_rss_mb()
    with Clock() as building:
        ranx_qrels, ranx_run = ranx.Qrels(qrels), ranx.Run(run)
    with Clock() as evaluating:
        result = ranx.evaluate(ranx_qrels, ranx_run, FIVE_RANX)
    extra = {
        "map": float(result["map"]), "import_seconds": importing.wall,
        "numba_seconds": warming.wall, "numba_cpu": warming.cpu, "numba_cache": state,
        "construct_seconds": building.wall, "evaluate_seconds": evaluating.wall,
        "cpu_seconds": building.cpu + evaluating.cpu, "load": building.load,
    }
    return {"seconds": building.wall + evaluating.wall, "peak_mb": peak_rss_mb(),
            "base_mb": base, "extra": extra}


# --------------------------------------------------------------------------- driver side


def ensure_pytrec_pickles(run_path: Path, qrels_path: Path) -> tuple[Path, Path]:
    """``pytrec_eval.parse_run``/``parse_qrel`` of the dataset's files, pickled beside them
    (made once; a pickle keeps the defaultdict type)."""
    import pytrec_eval

    out = []
    for source, parse in ((run_path, pytrec_eval.parse_run), (qrels_path, pytrec_eval.parse_qrel)):
        target = source.with_suffix(".pytrec.pickle")
        if not target.exists() or target.stat().st_mtime < source.stat().st_mtime:
            with open(source) as handle:
                parsed = parse(handle)
            tmp = target.with_suffix(".tmp")
            with open(tmp, "wb") as handle:
                pickler = pickle.Pickler(handle, protocol=pickle.HIGHEST_PROTOCOL)
                pickler.fast = True
                pickler.dump(parsed)
            os.replace(tmp, target)
        out.append(target)
    return out[0], out[1]


def _median(result, key: str) -> float | None:
    values = [v for v in result.extra.get(key, []) if isinstance(v, int | float)]
    return statistics.median(values) if values else None


def cpu_and_load(result) -> tuple[float | None, float | None]:
    """Median CPU seconds and load average of a Result's repeats (None if not recorded)."""
    return _median(result, "cpu_seconds"), _median(result, "load")


def print_ranx(result, scale: str) -> None:
    """ranx's breakdown: import, numba warm-up (cache cold/warm), construction, evaluate."""
    if result is None or not result.seconds:
        return
    caches = result.extra.get("numba_cache", [])
    warm = [s for s, c in zip(result.extra.get("numba_seconds", []), caches, strict=False)
            if c == "warm"]
    cold = [s for s, c in zip(result.extra.get("numba_seconds", []), caches, strict=False)
            if c != "warm"]
    numba = ", ".join(
        f"{label} {statistics.median(values):.2f} s (x{len(values)})"
        for label, values in (("cold", cold), ("warm", warm)) if values)
    print(f"ranx at {scale}: import {_median(result, 'import_seconds'):.2f} s; numba warm-up "
          f"[{numba}] (NUMBA_CACHE_DIR per repeat: {', '.join(caches)}); Qrels+Run "
          f"{_median(result, 'construct_seconds'):.3f} s + evaluate "
          f"{_median(result, 'evaluate_seconds'):.3f} s (the table's time; numba uses "
          f"{CORES} threads, cpu {_median(result, 'cpu_seconds'):.3f} s)")


def _check(name, title, passed, detail, scale):
    status = "N/A" if passed is None else ("PASS" if passed else "FAIL")
    return {"check": name, "title": title, "status": status, "detail": detail,
            "scale": scale, "issue": 30}


def issue30_checks(results: dict, scale: str, measure_set: str, trec_eval: dict) -> list[dict]:
    """Mappings (plain dicts and parsed defaultdicts) against pytrec_eval ``evaluate()`` at M
    and L, and ``cranfield eval``'s peak RSS at L against the trec_eval binary's."""
    checks = []

    def get(tool):
        found = results.get((tool, scale, measure_set))
        return found if found is not None and found.seconds else None

    need = MAPPING_TARGETS.get(scale)
    for number, (ours, theirs, what) in enumerate(MAPPING_PAIRS, start=1):
        if need is None:
            break
        title = f"cranfield on {what} >= {need:g}x pytrec_eval evaluate() [{measure_set}]"
        cran, pytrec = get(ours), get(theirs)
        if not cran or not pytrec:
            checks.append(_check(f"I{number}", title, None, "not measured", scale))
            continue
        slow, slow_cpu = _median(pytrec, "evaluate_seconds"), _median(pytrec, "evaluate_cpu")
        fast, fast_cpu = cran.median_seconds, _median(cran, "cpu_seconds")
        loads = [v for r in (cran, pytrec) for v in r.extra.get("load", [])]
        detail = (f"pytrec_eval evaluate() {slow:.3f} s / cranfield {fast:.3f} s = "
                  f"{slow / fast:.2f}x wall; cpu {slow_cpu:.3f} / {fast_cpu:.3f} s = "
                  f"{slow_cpu / fast_cpu:.2f}x (need >= {need:g}); load "
                  f"{min(loads):.1f}-{max(loads):.1f} on {CORES} cores, both single-threaded")
        read = _median(cran, "read_seconds")
        if read is not None and slow / fast < need:
            detail += f"; reading the two mappings alone: {read:.3f} s"
        checks.append(_check(f"I{number}", title, slow / fast >= need, detail, scale))
    if scale == "L":
        title = f"cranfield eval peak RSS at L <= trec_eval's [{measure_set}]"
        cli, binary = get("cranfield-cli"), get("trec_eval")
        if cli and binary:
            detail = (f"cranfield eval {cli.max_peak_mb:.1f} MB vs trec_eval "
                      f"{binary.max_peak_mb:.1f} MB ({trec_eval.get('path')}, "
                      f"{trec_eval.get('version')})")
            checks.append(_check("I3", title, cli.max_peak_mb <= binary.max_peak_mb, detail,
                                 scale))
        else:
            checks.append(_check("I3", title, None, "not measured", scale))
    for check in checks:
        check["measure_set"] = measure_set
    return checks
