"""The engine benchmark's evaluate_many case (issue #30), called by ``engine.py``.

150 runs x 50 topics x 1,000 documents against one qrels (``datagen.ensure_many_runs``: the
S dataset's documents and qrels, each run's scores S's plus seeded noise), the ``five``
measures. Each tool evaluates all the runs in one fresh worker process (repeated like
``engine.py``'s tools); the timed span includes reading the qrels:

* ``cranfield-many``: ``cranfield.evaluate_many(qrels_path, {name: run_path}, measures)``
  (the qrels read and indexed once), each Evaluation's ``per_topic`` built.
* ``cranfield-many-cli``: one ``cranfield eval -m ... QRELS RUN RUN ...`` process.
* ``cranfield-loop``: ``read_qrels`` once, then ``evaluate(qrels, read_run(p))`` per run.
* ``pytrec-loop``: ``parse_qrel`` and the ``RelevanceEvaluator`` once, then ``parse_run`` +
  ``evaluate`` per run.
* ``ranx-loop``: ``Qrels.from_file`` once, then ``Run.from_file`` + ``evaluate`` per run, after
  ``import ranx`` and a numba warm-up on the first run (both timed apart).
* ``trec_eval-loop``: one ``trec_eval`` process per run, as shell loops call it.

The check: the fastest of the anchors' loops (pytrec_eval, ranx, trec_eval) takes >= 5x
``cranfield-many``'s wall time. evaluate_many reads and ranks the run files in a compiled
pass on ``pass_threads()`` threads (at most 2, at most the cores) while it evaluates: the
check prints that bound beside the figure. CPU seconds (the children's for processes) and the load
average are printed beside wall times; ranx's numba uses every core, so its wall time can be
below its CPU time, by at most the number of cores.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from engine_proc import (
    CORES,
    Clock,
    children_cpu,
    children_peak_rss_mb,
    cranfield_map,
    current_rss_mb,
    import_cranfield,
    peak_rss_mb,
    pytrec_map,
)

FIVE = ["map", "ndcg_cut.10", "P.10", "recall.100", "recip_rank"]
FIVE_RANX = ["map", "ndcg@10", "precision@10", "recall@100", "mrr"]
WORKER_TOOLS = ("cranfield-many", "cranfield-many-cli", "cranfield-loop", "pytrec-loop",
                "ranx-loop", "trec_eval-loop")
ANCHOR_LOOPS = ("pytrec-loop", "ranx-loop", "trec_eval-loop")
LABELS = {
    "cranfield-many": "cranfield.evaluate_many",
    "cranfield-many-cli": "cranfield eval, all runs",
    "cranfield-loop": "cranfield evaluate loop",
    "pytrec-loop": "pytrec_eval loop",
    "ranx-loop": "ranx loop",
    "trec_eval-loop": "trec_eval loop (processes)",
}
TARGET = 5.0


# --------------------------------------------------------------------------- worker side


def _run_name(path: str) -> str:
    return Path(path).stem


def run_tool(tool: str, paths: dict) -> dict:
    """Evaluate every run with one tool, once, in this (fresh) process."""
    qrels, runs = paths["qrels"], paths["runs"]
    extra: dict = {}
    maps: list[float] = []
    base = current_rss_mb()
    if tool in ("cranfield-many", "cranfield-loop"):
        cranfield = import_cranfield()
        many = getattr(cranfield, "evaluate_many", None)
        if tool == "cranfield-many" and many is None:
            return {"skipped": "cranfield.evaluate_many is not there yet"}
        if tool == "cranfield-many":  # (the threads its text pass runs on: the bound)
            import importlib

            extra["threads"] = importlib.import_module("cranfield.evaluate_many").pass_threads()
        base = current_rss_mb()
        with Clock() as clock:
            if many is not None and tool == "cranfield-many":
                results = list(many(qrels, {_run_name(p): p for p in runs}, FIVE).values())
                for result in results:
                    _ = result.per_topic
            else:
                judged = cranfield.read_qrels(qrels)
                results = []
                for path in runs:
                    results.append(cranfield.evaluate(judged, cranfield.read_run(path), FIVE))
                    _ = results[-1].per_topic
        maps = [cranfield_map(result) for result in results]
        peak = peak_rss_mb()
    elif tool == "pytrec-loop":
        import pytrec_eval

        base = current_rss_mb()
        with Clock() as clock:
            with open(qrels) as handle:
                evaluator = pytrec_eval.RelevanceEvaluator(pytrec_eval.parse_qrel(handle),
                                                           set(FIVE))
            for path in runs:
                with open(path) as handle:
                    maps.append(pytrec_map(evaluator.evaluate(pytrec_eval.parse_run(handle))))
        peak = peak_rss_mb()
    elif tool == "ranx-loop":
        if paths.get("numba_cache_dir"):
            os.environ["NUMBA_CACHE_DIR"] = paths["numba_cache_dir"]
            extra["numba_cache"] = ("warm" if any(Path(paths["numba_cache_dir"]).rglob("*.nbi"))
                                    else "cold")
        with Clock() as importing:
            import ranx
        with Clock() as warming:
            ranx.evaluate(ranx.Qrels.from_file(qrels, kind="trec"),
                          ranx.Run.from_file(runs[0], kind="trec"), FIVE_RANX)
        extra.update(import_seconds=importing.wall, numba_seconds=warming.wall)
        base = current_rss_mb()
        with Clock() as clock:
            judged = ranx.Qrels.from_file(qrels, kind="trec")
            for path in runs:
                maps.append(float(ranx.evaluate(judged, ranx.Run.from_file(path, kind="trec"),
                                                FIVE_RANX)["map"]))
        peak = peak_rss_mb()
    elif tool in ("trec_eval-loop", "cranfield-many-cli"):
        measures = [arg for m in FIVE for arg in ("-m", m)]
        if tool == "trec_eval-loop":
            if not paths.get("trec_eval"):
                return {"skipped": "no trec_eval binary (--trec-eval or PATH)"}
            commands = [[paths["trec_eval"], *measures, qrels, path] for path in runs]
        else:
            commands = [[sys.executable, "-c", "import sys; from cranfield.cli import main; "
                         "sys.exit(main())", "eval", "--no-warnings", *measures, qrels, *runs]]
        cpu_before = children_cpu()
        with Clock() as clock:
            for command in commands:
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode != 0:
                    tail = done.stderr.strip().splitlines()[-1:] or [""]
                    return {"skipped": f"exit {done.returncode}: {tail[0][:120]}"}
                maps += [float(line.split()[2]) for line in done.stdout.splitlines()
                         if line.split()[:2] == ["map", "all"]]
        clock.cpu = children_cpu() - cpu_before
        peak, base = children_peak_rss_mb(), None
    else:
        raise ValueError(f"unknown tool {tool!r}")
    maps = [value for value in maps if value is not None]
    extra.update(cpu_seconds=clock.cpu, load=clock.load, runs=len(runs), evaluations=len(maps),
                 map=statistics.fmean(maps) if maps else None)
    return {"seconds": clock.wall, "peak_mb": peak, "base_mb": base, "extra": extra}


# --------------------------------------------------------------------------- driver side


def run_case(measure, datagen, args, paths_extra: dict) -> tuple[dict, list[dict], dict]:
    """Generate (or find) the runs, measure every tool, print the table and the check.

    ``measure`` is ``engine.measure``; returns (results by tool, checks, the case's meta)."""
    qrels, runs = datagen.ensure_many_runs("S", args.many_runs, args.seed, args.data_dir)
    paths = {"qrels": str(qrels), "runs": [str(p) for p in runs], **paths_extra}
    dataset = SimpleNamespace(scale=SimpleNamespace(name="many"))
    results = {}
    for tool in WORKER_TOOLS:
        results[tool] = measure(tool, "five", dataset, paths, args.repeat, args.timeout)
    meta = {"runs": len(runs), "topics": 50, "docs_per_topic": 1000, "qrels": str(qrels),
            "trec_eval": paths_extra.get("trec_eval")}
    print()
    print(f"evaluate_many: {len(runs)} runs x 50 topics x 1,000 docs against one qrels "
          f"({qrels}); measures five; each tool in a fresh process, median of {args.repeat}")
    print(f"trec_eval binary: {paths_extra.get('trec_eval')} "
          f"({paths_extra.get('trec_eval_version')})")
    header = (f"{'tool':28s} {'wall s':>8s} {'cpu s':>8s} {'ms/run':>7s} {'load':>5s} "
              f"{'peak MB':>8s} {'x many':>7s} {'mean map':>9s}")
    print(header)
    print("-" * len(header))
    many = results["cranfield-many"]
    for tool, result in results.items():
        label = LABELS[tool]
        if result.skipped or result.error:
            print(f"{label:28s} {result.skipped or 'ERROR: ' + str(result.error)}")
            continue
        cpu, load = _median(result, "cpu_seconds"), _median(result, "load")
        ratio = (f"{result.median_seconds / many.median_seconds:6.2f}x" if many.seconds
                 else f"{'n/a':>7s}")
        mean_map = _median(result, "map")
        print(f"{label:28s} {result.median_seconds:8.3f} {cpu:8.3f} "
              f"{1000 * result.median_seconds / len(runs):7.1f} {load:5.1f} "
              f"{result.max_peak_mb:8.1f} {ratio} "
              + (f"{mean_map:9.4f}" if mean_map is not None else f"{'-':>9s}"))
    if many.seconds and many.extra.get("threads"):
        print(f"(cranfield.evaluate_many: its text pass on {max(many.extra['threads'])} "
              f"thread(s) beside the evaluations; bound: {CORES} cores)")
    ranx = results.get("ranx-loop")
    if ranx is not None and ranx.seconds:
        print(f"(ranx loop: import {_median(ranx, 'import_seconds'):.2f} s and numba warm-up "
              f"{_median(ranx, 'numba_seconds'):.2f} s untimed, numba cache "
              f"{', '.join(ranx.extra.get('numba_cache', ['default']))}; numba runs on "
              f"{CORES} cores)")
    print("(x many = tool wall time / cranfield.evaluate_many's; cpu = the process's CPU time,\n"
          " its children's for processes; load = 1-minute load average at the start)")
    checks = [_check(results, len(runs))]
    for check in checks:
        print(f"  ({check['check']}) {check['title']}: {check['status']} - {check['detail']}")
    return results, checks, meta


def _median(result, key: str) -> float | None:
    values = [v for v in result.extra.get(key, []) if isinstance(v, int | float)]
    return statistics.median(values) if values else None


def _check(results: dict, n_runs: int) -> dict:
    title = f"evaluate_many >= {TARGET:g}x the fastest per-run loop of the anchors"
    many = results["cranfield-many"]
    loops = [results[t] for t in ANCHOR_LOOPS if results[t].seconds]
    if not many.seconds or not loops:
        status, detail = "N/A", "not measured"
    else:
        fastest = min(loops, key=lambda r: r.median_seconds)
        wall = fastest.median_seconds / many.median_seconds
        many_cpu, loop_cpu = _median(many, "cpu_seconds"), _median(fastest, "cpu_seconds")
        loads = [v for r in (many, fastest) for v in r.extra.get("load", [])]
        status = "PASS" if wall >= TARGET else "FAIL"
        threads = max([int(t) for t in many.extra.get("threads", []) if t] or [1])
        detail = (f"fastest loop {LABELS[fastest.tool]} {fastest.median_seconds:.3f} s / "
                  f"evaluate_many {many.median_seconds:.3f} s = {wall:.2f}x wall; cpu "
                  f"{loop_cpu:.3f} / {many_cpu:.3f} s = {loop_cpu / many_cpu:.2f}x (need >= "
                  f"{TARGET:g}); machine bound: {CORES} cores at load {min(loads):.1f}-"
                  f"{max(loads):.1f}, so a process gets about {min(1.0, CORES / max(loads)):.0%}"
                  f" of a core and wall ratios are noisy; the cpu ratio is the figure the load"
                  f" does not move; evaluate_many runs its text pass on {threads} thread(s) "
                  f"beside the evaluations (bound: {CORES} cores), so its wall time can be "
                  f"below its CPU time")
    return {"check": "I4", "title": title, "status": status, "detail": detail,
            "scale": "many", "measure_set": "five", "issue": 30}
