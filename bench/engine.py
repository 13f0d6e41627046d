"""Benchmark cranfield's evaluation engine against pytrec_eval, ranx and trec_eval.

For each scale (see ``datagen.py``) and measure set it times, from one seeded dataset:

1. ``cranfield-files``: ``cranfield.evaluate(cranfield.read_qrels(p), cranfield.read_run(p), m)``
2. ``cranfield-maps``: ``cranfield.evaluate(qrels_dict, run_dict, m)``
3. ``pytrec-maps``: ``pytrec_eval.RelevanceEvaluator(qrels_dict, m).evaluate(run_dict)``
4. ``pytrec-files``: ``pytrec_eval.parse_run``/``parse_qrel`` on open files, then evaluate
5. ``ranx``: ``ranx.evaluate(Qrels(qrels_dict), Run(run_dict), m)`` after a numba warm-up
   (import, warm-up, construction and evaluate timed apart: ``engine_maps.py``)
6. ``trec_eval``: the binary (``trec_eval -m ... qrels run``): ``--trec-eval`` or PATH
7. ``cranfield-cli``: a whole ``cranfield eval -m ... qrels run`` process (interpreter
   start-up and imports included), timed like the trec_eval binary
8. ``cranfield-maps-dd`` / ``pytrec-maps-dd``: 2 and 3 on ``pytrec_eval.parse_run``/``parse_qrel``'s
   defaultdicts (``engine_maps.py``); then the evaluate_many case (``engine_many.py``)

Every repeat of every tool x scale x measure set runs in a fresh subprocess, so its peak
memory is that process's own high-water mark (``VmHWM``; ``ru_maxrss`` would inherit the
driver's) and no cache is shared between timings. Only the evaluation is timed (for the
"files" variants, the reading too); the "maps" variants unpickle their mappings (cached
beside the data) in the subprocess before the clock starts. Each table shows the
median time over ``--repeat`` runs, the highest peak RSS, peak RSS / run file size, and the
time as a multiple of cranfield's on the same kind of input (files or mappings). Finally the
Done-when checks for scale M are printed as PASS/FAIL; they are informational (exit code 0).

    python bench/engine.py                              # S, M, L; both measure sets
    python bench/engine.py --scales S,M --repeat 5 --json bench/results/run.json
    python bench/engine.py --tools pytrec-maps,ranx --sets five
    python bench/engine.py --scales L --sets all_trec,graded,diversity --tools cranfield-files
"""

from __future__ import annotations

import sys

# Run as a script, this file's folder leads sys.path, where bench/queue.py and bench/http.py
# would shadow the standard library's queue and http for everything imported later (pyarrow,
# numba, redis...): drop that entry first.
if sys.path and sys.path[0] == __import__("os").path.dirname(__file__):
    sys.path.pop(0)

import argparse
import json
import os
import pickle
import platform
import resource
import shutil
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import datagen

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent

#: The five headline measures, in trec_eval spelling (cranfield, pytrec_eval, trec_eval -m).
FIVE_MEASURES = ["map", "ndcg_cut.10", "P.10", "recall.100", "recip_rank"]
#: The same five in ranx's spelling.
FIVE_MEASURES_RANX = ["map", "ndcg@10", "precision@10", "recall@100", "mrr"]

#: Measures beyond trec_eval (cranfield only), timed beside the trec_eval sets.
GRADED_MEASURES = ["nDCG(gain=exp)@10", "DCG(discount=jk,b=2)@10", "CG@10", "ERR@20", "GAP",
                   "RBP(p=0.8)"]
#: ndeval's measures, from subtopic qrels derived from the dataset's (see subtopic_qrels).
DIVERSITY_MEASURES = ["alpha_nDCG@20", "alpha_DCG@20", "ERR_IA@20", "nERR_IA@20", "P_IA@10",
                      "strec@20", "NRBP", "nNRBP", "MAP_IA"]

MEASURE_SETS = ("five", "all_trec", "graded", "diversity")
CRANFIELD_ONLY_SETS = ("graded", "diversity")


@dataclass(frozen=True)
class Tool:
    """One benchmarked way of evaluating a run."""

    key: str
    label: str
    #: "files" or "maps": which cranfield variant its time is compared with.
    input_kind: str


TOOLS: dict[str, Tool] = {
    tool.key: tool
    for tool in (
        Tool("cranfield-files", "cranfield (files)", "files"),
        Tool("cranfield-cli", "cranfield eval (process)", "files"),
        Tool("cranfield-maps", "cranfield (mappings)", "maps"),
        Tool("pytrec-maps", "pytrec_eval (mappings)", "maps"),
        Tool("cranfield-maps-dd", "cranfield (parsed dd)", "maps-dd"),
        Tool("pytrec-maps-dd", "pytrec_eval (parsed dd)", "maps-dd"),
        Tool("pytrec-files", "pytrec_eval (files)", "files"),
        Tool("ranx", "ranx (mappings)", "maps"),
        Tool("trec_eval", "trec_eval binary (files)", "files"),
    )
}
CRANFIELD_BASELINE = {"files": "cranfield-files", "maps": "cranfield-maps",
                      "maps-dd": "cranfield-maps-dd"}


@dataclass
class Result:
    """Aggregated measurements of one tool x scale x measure set."""

    tool: str
    scale: str
    measure_set: str
    seconds: list[float] = field(default_factory=list)
    peak_mb: list[float] = field(default_factory=list)
    base_mb: list[float] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    skipped: str | None = None
    error: str | None = None

    @property
    def median_seconds(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None

    @property
    def max_peak_mb(self) -> float | None:
        return max(self.peak_mb) if self.peak_mb else None


# --------------------------------------------------------------------------- worker side


def _current_rss_mb() -> float:
    """Resident set size of this process now, in MB."""
    with open("/proc/self/statm") as handle:
        resident_pages = int(handle.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def _peak_rss_mb() -> float:
    """Peak resident set size of this process, in MB.

    Read from ``VmHWM`` in ``/proc/self/status`` where there is one: Linux carries a parent's
    high-water mark into a child's ``ru_maxrss`` across fork and exec, so ``ru_maxrss`` of a
    worker would include the driver's memory (numpy, pyarrow, the pickled mappings it built).
    """
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6


def _children_peak_rss_mb() -> float:
    """Peak RSS of the waited-for children (``ru_maxrss`` in KiB on Linux), in MB.

    A child's figure is at least this (small) worker's RSS when it spawned the child; a
    trec_eval run on real data peaks far above that.
    """
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e6


def _mean_of(per_topic: dict, measure: str) -> float:
    """Mean of one measure over a pytrec_eval result (a sanity figure, not timed)."""
    return statistics.fmean(values[measure] for values in per_topic.values())


def _cranfield_mean_map(evaluation) -> float | None:
    """Mean ``map`` of a cranfield evaluation (``.aggregate``), if it has one; not timed."""
    aggregate = getattr(evaluation, "aggregate", None)
    try:
        return float(aggregate["map"])
    except (KeyError, TypeError, ValueError):
        return None


def _import_cranfield():
    """cranfield with what an evaluation imports loaded (its names load lazily)."""
    from engine_proc import import_cranfield

    return import_cranfield()


def _cranfield_measures(measure_set: str) -> list[str]:
    return {"five": FIVE_MEASURES, "graded": GRADED_MEASURES,
            "diversity": DIVERSITY_MEASURES}.get(measure_set, ["all_trec"])


def subtopic_qrels(qrels_path: Path) -> Path:
    """Diversity qrels beside a dataset's qrels (made once): each judged document keeps its
    line for subtopic 1 and, when relevant, is also relevant to subtopic 2 and/or 3 as a
    hash of its docid decides, so topics have 1-3 subtopics with overlapping documents."""
    out = qrels_path.with_name("qrels-subtopics.txt")
    if out.exists():
        return out
    import zlib

    lines = []
    with open(qrels_path, "rb") as handle:
        for line in handle:
            topic, _, doc, grade = line.split()
            rel = int(grade) > 0
            lines.append(b"%s 1 %s %d\n" % (topic, doc, rel))
            h = zlib.crc32(doc)
            for sub in (2, 3):
                if rel and h & (1 << sub):
                    lines.append(b"%s %d %s 1\n" % (topic, sub, doc))
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(b"".join(lines))
    tmp.replace(out)
    return out


def _pytrec_measures(pytrec_eval, measure_set: str) -> set[str]:
    return set(FIVE_MEASURES) if measure_set == "five" else set(pytrec_eval.supported_measures)


def _load_pickle(path: str):
    with open(path, "rb") as handle:
        return pickle.load(handle)


def _run_tool(tool: str, measure_set: str, paths: dict[str, str]) -> dict:
    """Time one tool once in this (fresh) process; return the measurement as a dict.

    ``paths`` holds the run and qrels files (``run``, ``qrels``) and their pickled mappings
    (``run_pickle``, ``qrels_pickle``), which the mapping variants load before timing.
    """
    import engine_many
    import engine_maps

    if tool in engine_many.WORKER_TOOLS:
        return engine_many.run_tool(tool, paths)
    extra: dict = {}
    run_path, qrels_path = paths["run"], paths["qrels"]
    if measure_set in CRANFIELD_ONLY_SETS and not tool.startswith("cranfield"):
        return {"skipped": f"does not offer the {measure_set} measures"}
    if measure_set == "diversity":
        if tool != "cranfield-files":
            return {"skipped": "subtopic qrels are read from files"}
        qrels_path = str(subtopic_qrels(Path(qrels_path)))
    if tool in engine_maps.WORKER_TOOLS:
        return engine_maps.run_tool(tool, measure_set, paths, _cranfield_measures(measure_set))
    extra["load"] = os.getloadavg()[0]
    if tool == "cranfield-files":
        cranfield = _import_cranfield()
        measures = _cranfield_measures(measure_set)
        base = _current_rss_mb()
        started, cpu_started = time.perf_counter(), time.process_time()
        result = cranfield.evaluate(
            cranfield.read_qrels(qrels_path, diversity=measure_set == "diversity"),
            cranfield.read_run(run_path),
            measures,
        )
        _ = result.per_topic  # build the {topic: {measure: value}} dicts, as pytrec_eval does
        seconds = time.perf_counter() - started
        extra["cpu_seconds"] = time.process_time() - cpu_started
        extra["map"] = _cranfield_mean_map(result)

    elif tool == "pytrec-files":
        import pytrec_eval

        measures = _pytrec_measures(pytrec_eval, measure_set)
        base = _current_rss_mb()
        started, cpu_started = time.perf_counter(), time.process_time()
        with open(run_path) as handle:
            run = pytrec_eval.parse_run(handle)
        with open(qrels_path) as handle:
            qrels = pytrec_eval.parse_qrel(handle)
        result = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
        seconds = time.perf_counter() - started
        extra["cpu_seconds"] = time.process_time() - cpu_started
        extra["map"] = _mean_of(result, "map")

    elif tool in ("trec_eval", "cranfield-cli"):
        measures = _cranfield_measures(measure_set)
        if tool == "trec_eval":
            executable = paths.get("trec_eval") or shutil.which("trec_eval")
            if executable is None:
                return {"skipped": "no binary (--trec-eval or PATH)"}
            command = [executable]
        else:
            command = [sys.executable, "-c", "import sys; from cranfield.cli import main; "
                       "sys.exit(main())", "eval", "--no-warnings"]
        command += [*(arg for m in measures for arg in ("-m", m)), qrels_path, run_path]
        base = None
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        completed = subprocess.run(command, capture_output=True, text=True, check=True)
        seconds = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        extra["cpu_seconds"] = (after.ru_utime + after.ru_stime - usage.ru_utime
                                - usage.ru_stime)
        for line in completed.stdout.splitlines():
            fields = line.split()
            if len(fields) == 3 and fields[0] == "map" and fields[1] == "all":
                extra["map"] = float(fields[2])
        return {
            "seconds": seconds,
            "peak_mb": _children_peak_rss_mb(),
            "base_mb": None,
            "extra": extra,
        }

    else:
        raise ValueError(f"unknown tool {tool!r}")

    peak = _peak_rss_mb()
    del result
    return {"seconds": seconds, "peak_mb": peak, "base_mb": base, "extra": extra}


def worker_main(tool: str, measure_set: str, paths_json: str) -> int:
    """Entry point of a measuring subprocess: print one JSON line with the measurement."""
    sys.path.append(str(BENCH_DIR))  # engine_maps, engine_many (see the top of this file)
    try:
        measurement = _run_tool(tool, measure_set, json.loads(paths_json))
    except ImportError as exc:
        measurement = {"skipped": f"not importable: {exc}"}
    except Exception as exc:  # reported in the table, the benchmark goes on
        measurement = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    print("BENCH-RESULT " + json.dumps(measurement), flush=True)
    return 0


# --------------------------------------------------------------------------- driver side


def measure(
    tool: str,
    measure_set: str,
    dataset: datagen.Dataset,
    paths: dict[str, str],
    repeat: int,
    timeout: float,
) -> Result:
    """Run ``repeat`` fresh worker processes for one tool x dataset x measure set."""
    result = Result(tool=tool, scale=dataset.scale.name, measure_set=measure_set)
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        tool,
        measure_set,
        json.dumps(paths),
    ]
    for attempt in range(repeat):
        try:
            completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            result.error = f"timed out after {timeout:.0f} s"
            return result
        measurement = _parse_worker_output(completed)
        if "skipped" in measurement:
            result.skipped = measurement["skipped"]
            return result
        if "error" in measurement:
            result.error = measurement["error"]
            return result
        result.seconds.append(measurement["seconds"])
        result.peak_mb.append(measurement["peak_mb"])
        if measurement.get("base_mb") is not None:
            result.base_mb.append(measurement["base_mb"])
        for name, value in measurement.get("extra", {}).items():
            result.extra.setdefault(name, []).append(value)
        _progress(f"  {tool:16s} {measure_set:8s} #{attempt + 1}: {measurement['seconds']:.3f} s")
    return result


def _parse_worker_output(completed: subprocess.CompletedProcess) -> dict:
    for line in reversed(completed.stdout.splitlines()):
        if line.startswith("BENCH-RESULT "):
            return json.loads(line.removeprefix("BENCH-RESULT "))
    tail = (completed.stderr or completed.stdout).strip().splitlines()[-3:]
    return {"error": f"worker exited {completed.returncode}: " + " | ".join(tail)[:300]}


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _ratio(result: Result, results: dict[tuple[str, str, str], Result]) -> float | None:
    """Tool time / cranfield time on the same kind of input, at the same scale and set."""
    baseline_key = CRANFIELD_BASELINE[TOOLS[result.tool].input_kind]
    baseline = results.get((baseline_key, result.scale, result.measure_set))
    if baseline is None or not baseline.median_seconds or result.median_seconds is None:
        return None
    return result.median_seconds / baseline.median_seconds


def print_table(
    dataset: datagen.Dataset,
    measure_set: str,
    tools: list[str],
    results: dict[tuple[str, str, str], Result],
) -> None:
    """Print one scale x measure set table."""
    import engine_maps

    run_mb = dataset.run_bytes / 1e6
    names = ", ".join(_cranfield_measures(measure_set))
    print()
    print(
        f"Scale {dataset.scale.name}: {dataset.scale.description}; run file {run_mb:.1f} MB "
        f"({dataset.meta['run_lines']:,} lines), qrels {dataset.meta['qrels_lines']:,} lines"
    )
    print(f"Measures: {measure_set} ({names})")
    header = (
        f"{'tool':26s} {'median s':>10s} {'cpu s':>8s} {'load':>5s} {'peak MB':>9s} "
        f"{'peak/file':>10s} "
        f"{'input MB':>9s} {'x cranfield':>12s} {'mean map':>9s}"
    )
    print(header)
    print("-" * len(header))
    for tool in tools:
        result = results[(tool, dataset.scale.name, measure_set)]
        label = TOOLS[tool].label
        if result.skipped or result.error:
            print(f"{label:26s} {result.skipped or 'ERROR: ' + str(result.error)}")
            continue
        peak = result.max_peak_mb
        base = f"{statistics.median(result.base_mb):9.1f}" if result.base_mb else f"{'-':>9s}"
        ratio = _ratio(result, results)
        ratio_text = f"{ratio:11.2f}x" if ratio is not None else f"{'n/a':>12s}"
        maps = [value for value in result.extra.get("map", []) if value is not None]
        map_text = f"{maps[0]:9.4f}" if maps else f"{'-':>9s}"
        cpu, load = engine_maps.cpu_and_load(result)
        cpu_text = f"{cpu:8.3f} {load:5.1f}" if cpu is not None else f"{'-':>8s} {'-':>5s}"
        print(
            f"{label:26s} {result.median_seconds:10.3f} {cpu_text} {peak:9.1f} "
            f"{peak / run_mb:10.2f} "
            f"{base} {ratio_text} {map_text}"
        )
    print(
        "(x cranfield = tool time / cranfield time on the same input kind: files vs files,\n"
        " mappings vs mappings; input MB = RSS just before the timed call; mean map = a\n"
        " sanity figure that every tool should agree on; cpu s = median CPU seconds of the\n"
        f" timed span, all threads, the child's for processes; load = 1-minute load average\n"
        f" at its start, on {os.cpu_count()} cores)"
    )
    if "ranx" in tools:
        engine_maps.print_ranx(results.get(("ranx", dataset.scale.name, measure_set)),
                               dataset.scale.name)


def done_when_checks(
    results: dict[tuple[str, str, str], Result], dataset: datagen.Dataset, measure_set: str
) -> list[dict]:
    """The issue's Done-when checks at scale M, as dicts with a status and the numbers."""

    def get(tool: str) -> Result | None:
        result = results.get((tool, dataset.scale.name, measure_set))
        return result if result is not None and result.seconds else None

    checks = []
    cran_maps, pytrec_maps = get("cranfield-maps"), get("pytrec-maps")
    if cran_maps and pytrec_maps:
        pytrec_eval_seconds = statistics.median(pytrec_maps.extra["evaluate_seconds"])
        speedup = pytrec_eval_seconds / cran_maps.median_seconds
        detail = (
            f"pytrec_eval evaluate() {pytrec_eval_seconds:.3f} s / cranfield mappings "
            f"{cran_maps.median_seconds:.3f} s = {speedup:.2f}x (need >= 2)"
        )
        checks.append(_check("a", "cranfield mappings >= 2x faster", speedup >= 2, detail))
    else:
        checks.append(_check("a", "cranfield mappings >= 2x faster", None, "not measured"))

    cran_files, pytrec_files = get("cranfield-files"), get("pytrec-files")
    if cran_files and pytrec_files:
        speedup = pytrec_files.median_seconds / cran_files.median_seconds
        detail = (
            f"pytrec_eval parse+evaluate {pytrec_files.median_seconds:.3f} s / cranfield files "
            f"{cran_files.median_seconds:.3f} s = {speedup:.2f}x (need >= 2)"
        )
        checks.append(_check("b", "cranfield files >= 2x faster", speedup >= 2, detail))
    else:
        checks.append(_check("b", "cranfield files >= 2x faster", None, "not measured"))

    if cran_files:
        run_mb = dataset.run_bytes / 1e6
        peak = cran_files.max_peak_mb
        detail = (
            f"cranfield (files) peak {peak:.1f} MB / run file {run_mb:.1f} MB = "
            f"{peak / run_mb:.2f} (need <= 2)"
        )
        checks.append(
            _check("c", "cranfield peak memory <= 2x run file", peak <= 2 * run_mb, detail)
        )
    else:
        checks.append(_check("c", "cranfield peak memory <= 2x run file", None, "not measured"))
    for check in checks:
        check["measure_set"] = measure_set
    return checks


#: Issue #19's targets per scale: (trec_eval / cranfield eval, pytrec_eval files / cranfield
#: eval, pytrec_eval evaluate() / cranfield mappings), each a minimum ratio of times.
ISSUE19_TARGETS = {"M": (4.0, 4.0, 8.0), "L": (5.0, 2.0, 3.0)}


def issue19_checks(results: dict[tuple[str, str, str], Result], scale: str,
                   measure_set: str) -> list[dict]:
    """Issue #19's targets at one scale: whole ``cranfield eval`` processes (start-up and
    imports counted) against the trec_eval binary and pytrec_eval parse + evaluate, the
    in-process mapping evaluation against pytrec_eval's ``evaluate()``, and peak RSS against
    trec_eval's."""
    if scale not in ISSUE19_TARGETS:
        return []

    def get(tool: str) -> Result | None:
        result = results.get((tool, scale, measure_set))
        return result if result is not None and result.seconds else None

    need_trec, need_pytrec, need_maps = ISSUE19_TARGETS[scale]
    cli, trec, pytrec_files = get("cranfield-cli"), get("trec_eval"), get("pytrec-files")
    maps, pytrec_maps = get("cranfield-maps"), get("pytrec-maps")
    checks = []

    def ratio_check(name, title, slow, fast, need, slow_label, fast_label, slow_s=None,
                    why=None):
        if slow is None or fast is None:
            checks.append(_check(name, title, None, "not measured"))
            return
        slow_s = slow.median_seconds if slow_s is None else slow_s
        ratio = slow_s / fast.median_seconds
        detail = (f"{slow_label} {slow_s:.3f} s / {fast_label} "
                  f"{fast.median_seconds:.3f} s = {ratio:.2f}x (need >= {need:g})")
        if ratio < need and why:
            detail += f"; why not: {why}"
        checks.append(_check(name, title, ratio >= need, detail))

    ratio_check("T1", f"cranfield eval >= {need_trec:g}x trec_eval", trec, cli, need_trec,
                "trec_eval", "cranfield eval")
    ratio_check("T2", f"cranfield eval >= {need_pytrec:g}x pytrec_eval (files)", pytrec_files,
                cli, need_pytrec, "pytrec_eval parse+evaluate", "cranfield eval")
    why_maps = None
    if maps and maps.extra.get("read_seconds"):
        read = statistics.median(maps.extra["read_seconds"])
        why_maps = (f"reading the two mappings alone (the grammar's one pass over every key "
                    f"and value, compiled) takes {read:.3f} s, measured again after the timed "
                    f"call, {read / maps.median_seconds:.0%} of cranfield's time; the rest is "
                    f"the evaluation and the per-topic dicts (docs/performance.md)")
    ratio_check("T3", f"cranfield mappings >= {need_maps:g}x pytrec_eval evaluate()",
                pytrec_maps, maps, need_maps, "pytrec_eval evaluate()", "cranfield mappings",
                statistics.median(pytrec_maps.extra["evaluate_seconds"]) if pytrec_maps
                else None, why=why_maps)
    if cli and trec:
        ok = cli.max_peak_mb <= trec.max_peak_mb
        checks.append(_check("T4", "cranfield eval peak RSS <= trec_eval's", ok,
                             f"{cli.max_peak_mb:.1f} MB vs {trec.max_peak_mb:.1f} MB"))
    else:
        checks.append(_check("T4", "cranfield eval peak RSS <= trec_eval's", None,
                             "not measured"))
    for check in checks:
        check["measure_set"] = measure_set
        check["scale"] = scale
    return checks


def _check(name: str, title: str, passed: bool | None, detail: str) -> dict:
    status = "N/A" if passed is None else ("PASS" if passed else "FAIL")
    return {"check": name, "title": title, "status": status, "detail": detail}


def _versions() -> dict:
    versions = {"python": platform.python_version(), "machine": platform.machine()}
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover
        return versions
    for package in ("cranfield", "numpy", "pyarrow", "pytrec-eval-terrier", "ranx", "numba"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = None
    versions["trec_eval"] = shutil.which("trec_eval")
    versions["cpus"] = os.cpu_count()
    return versions


def _split_list(text: str, allowed, what: str, transform=str) -> list[str]:
    items = [transform(item.strip()) for item in text.split(",") if item.strip()]
    unknown = [item for item in items if item not in allowed]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)} (choose from {', '.join(allowed)})")
    return items


def main(argv: list[str] | None = None) -> int:
    """Generate or reuse the datasets, measure every tool in subprocesses, print the tables."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return worker_main(*argv[1:4])

    sys.path.append(str(BENCH_DIR))  # after the standard library: see the top of this file
    import datagen  # sibling module; imported by the driver only, never by the workers

    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scales", default="S,M,L", help="comma-separated subset of S,M,L")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--sets", default="five,all_trec,graded,diversity",
                        help="measure sets: five,all_trec,graded,diversity")
    parser.add_argument(
        "--tools", default=",".join(TOOLS), help=f"comma-separated subset of {','.join(TOOLS)}"
    )
    parser.add_argument("--seed", type=int, default=datagen.DEFAULT_SEED)
    parser.add_argument("--data-dir", type=Path, default=datagen.DEFAULT_DATA_DIR)
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per worker run")
    parser.add_argument("--json", type=Path, help="also write all results to this JSON file")
    parser.add_argument("--trec-eval", help="the trec_eval binary (default: the one on PATH)")
    parser.add_argument("--numba-cache-dir", type=Path,
                        help="ranx's NUMBA_CACHE_DIR (default: DATA_DIR/numba-cache)")
    parser.add_argument("--numba-cold", action="store_true",
                        help="empty the numba cache first: the first ranx repeat compiles")
    parser.add_argument("--many-runs", type=int, default=150,
                        help="runs of the evaluate_many case (0: skip the case)")
    args = parser.parse_args(argv)
    import engine_many
    import engine_maps
    from engine_proc import trec_eval_binary, trec_eval_version

    trec_eval = trec_eval_binary(args.trec_eval)
    trec_eval_info = {"path": trec_eval, "version": trec_eval_version(trec_eval)}
    numba_cache = args.numba_cache_dir or args.data_dir / "numba-cache"
    if args.numba_cold:
        shutil.rmtree(numba_cache, ignore_errors=True)
    numba_cache.mkdir(parents=True, exist_ok=True)
    shared_paths = {"trec_eval": trec_eval, "numba_cache_dir": str(numba_cache.resolve())}
    print(f"trec_eval: {trec_eval} ({trec_eval_info['version']}); NUMBA_CACHE_DIR "
          f"{shared_paths['numba_cache_dir']}; {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}")

    scales = _split_list(args.scales, datagen.SCALES, "scale", str.upper)
    measure_sets = _split_list(args.sets, MEASURE_SETS, "measure set")
    tools = [tool for tool in TOOLS if tool in _split_list(args.tools, TOOLS, "tool")]
    if args.repeat < 1:
        raise SystemExit("--repeat must be at least 1")

    results: dict[tuple[str, str, str], Result] = {}
    datasets: dict[str, datagen.Dataset] = {}
    for scale in scales:
        _progress(f"scale {scale}: preparing data (cached under {args.data_dir})")
        dataset = datagen.ensure_dataset(scale, args.seed, args.data_dir)
        datasets[scale] = dataset
        paths = {"run": str(dataset.run_path), "qrels": str(dataset.qrels_path), **shared_paths}
        if any(TOOLS[tool].input_kind == "maps" for tool in tools):
            run_pickle, qrels_pickle = datagen.ensure_mapping_pickles(dataset)
            paths.update(run_pickle=str(run_pickle), qrels_pickle=str(qrels_pickle))
        if any(TOOLS[tool].input_kind == "maps-dd" for tool in tools):
            run_dd, qrels_dd = engine_maps.ensure_pytrec_pickles(dataset.run_path,
                                                                 dataset.qrels_path)
            paths.update(run_dd_pickle=str(run_dd), qrels_dd_pickle=str(qrels_dd))
        for measure_set in measure_sets:
            for tool in tools:
                results[(tool, scale, measure_set)] = measure(
                    tool, measure_set, dataset, paths, args.repeat, args.timeout
                )
            print_table(dataset, measure_set, tools, results)
            sys.stdout.flush()

    checks: list[dict] = []
    if "M" in datasets:
        print()
        print("Done-when checks at scale M (informational):")
        for measure_set in [m for m in measure_sets if m not in CRANFIELD_ONLY_SETS]:
            for check in done_when_checks(results, datasets["M"], measure_set):
                checks.append(check)
                print(
                    f"  ({check['check']}) [{measure_set}] {check['title']}: "
                    f"{check['status']} - {check['detail']}"
                )

    for scale in [s for s in scales if s in ISSUE19_TARGETS]:
        for measure_set in [m for m in measure_sets if m not in CRANFIELD_ONLY_SETS]:
            found = issue19_checks(results, scale, measure_set)
            if found:
                print()
                print(f"Issue #19 targets at scale {scale} [{measure_set}]:")
            for check in found:
                checks.append(check)
                print(f"  ({check['check']}) {check['title']}: {check['status']} - "
                      f"{check['detail']}")

    for scale in [s for s in scales if s in engine_maps.MAPPING_TARGETS]:
        for measure_set in [m for m in measure_sets if m not in CRANFIELD_ONLY_SETS]:
            found = engine_maps.issue30_checks(results, scale, measure_set, trec_eval_info)
            if found:
                print()
                print(f"Issue #30 targets at scale {scale} [{measure_set}]:")
            for check in found:
                checks.append(check)
                print(f"  ({check['check']}) {check['title']}: {check['status']} - "
                      f"{check['detail']}")
    many_results, many_meta = {}, None
    if args.many_runs > 0:
        paths = {**shared_paths, "trec_eval_version": trec_eval_info["version"]}
        many_results, many_checks, many_meta = engine_many.run_case(measure, datagen, args,
                                                                     paths)
        checks += many_checks

    if args.json:
        report = {
            "versions": {**_versions(), "trec_eval": trec_eval_info},
            "evaluate_many": many_meta,
            "repeat": args.repeat,
            "seed": args.seed,
            "datasets": {name: ds.meta for name, ds in datasets.items()},
            "results": [
                {
                    **asdict(result),
                    "median_seconds": result.median_seconds,
                    "max_peak_mb": result.max_peak_mb,
                    "ratio_vs_cranfield": _ratio(result, results) if result.tool in TOOLS
                    else None,
                }
                for result in [*results.values(), *many_results.values()]
            ],
            "checks": checks,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
