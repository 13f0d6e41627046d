"""``evaluate_many``: several runs against one qrels (a track's submissions, a parameter
sweep), each evaluated as :func:`cranfield.evaluate` evaluates it, the qrels read, checked and
indexed once. Room: top (beside evaluate).

What one call settles once: the options and measures (:func:`cranfield.evaluate_checks.
plan_evaluation`: their refusals, the measures' budget, ``-Z`` and topic metadata read) and
the qrels (read and made one judgment per document as :func:`cranfield.evaluate.judged_qrels`
makes them, or read as subtopic qrels for diversity measures). Then each run in turn is read,
ranked and measured by the code :func:`cranfield.evaluate` runs (:func:`cranfield.evaluate.
evaluate_read`), and nothing of it is kept but its :class:`Evaluation`, so the memory a call
needs at its peak is a few runs' (the one measured, those read ahead). A run file is read and
ranked against the qrels indexed once by the compiled text pass
(:mod:`cranfield.inputs.text_pass`), on :func:`pass_threads` threads ahead of the evaluations;
what it declines is read by read_run as evaluate reads it. The Evaluation of each run equals
``evaluate(qrels, run, measures, **options)``'s.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from itertools import islice
from typing import Any

from .errors import CranfieldError, InputError
from .evaluate import (
    Evaluation,
    evaluate,
    evaluate_diversity,
    evaluate_read,
    judged_qrels,
)
from .evaluate_checks import declared_gains, plan_evaluation
from .inputs.io import read_qrels, read_run
from .inputs.ranking import TIE_WORK_MIN, TIE_WORK_PER_ROW
from .inputs.run_naming import run_names
from .inputs.swapped import refuse_swapped, refuse_swapped_runs
from .inputs.text_pass import PassedRun, pass_run, qrels_table
from .inputs.trec_source import path_candidate
from .measures import PROFILES, real_gains

CALL, FORM = "cranfield.evaluate_many", "evaluate_many(qrels, runs, ...)"


def evaluate_many(qrels: Any, runs: Mapping[str, Any] | Sequence[Any],
                  measures: list[str] | str | None = None,
                  **options: Any) -> dict[str, Evaluation]:
    """Evaluate every run of ``runs`` against ``qrels``: ``{name: Evaluation}``, in the
    order of ``runs``, each equal to ``evaluate(qrels, run, measures, **options)``.

    ``runs``: a mapping ``{name: run}``, or a sequence of runs, named by
    :func:`run_names_of` (a path by its file's stem, made unique as ``cranfield compare``
    makes them; any other run ``run1``, ``run2``... by its place). Each run is anything
    :func:`cranfield.evaluate` accepts (a path, TREC text or bytes, a file object, a
    ``{topic: {docid: score}}`` mapping, columns, a :class:`cranfield.Run`); ``qrels``
    likewise, read once. ``measures`` and ``options`` are evaluate's (``profile``,
    ``relevance_level``, ``judged_only``, ``depth``, ``complete_topics``,
    ``collection_size``, ``aggregation``, ``require_overlap``, ``zscores``,
    ``qrels_format``, ``topic_metadata``), checked once, before any input is read.

    The first run that cannot be evaluated stops the call with evaluate's error for it
    (an :class:`InputError`, :class:`EvaluationError`...), made to name the run: where
    evaluate calls a run read from anything but a file ``run`` (``run.q1.d3: ...``,
    ``run:4: ...``), this says its name (``bm25.q1.d3: ...``; a file keeps its path), and
    the error's ``run`` attribute (and a note in its traceback) holds the name.
    :func:`iter_evaluations` yields each evaluation as it is made (the command line prints
    each run's as it comes).
    """
    return dict(iter_evaluations(qrels, runs, measures, **options))


def run_names_of(runs: Mapping[str, Any] | Sequence[Any]) -> list[str]:
    """The names :func:`evaluate_many` gives ``runs``: a mapping's keys (each a str); for a
    sequence, :func:`cranfield.inputs.run_naming.run_names` of the runs given as paths (a
    PathLike, or a str naming a file), the others ``run{i}`` (1-based)."""
    if isinstance(runs, Mapping):
        names = list(runs)
        bad = [n for n in names if not isinstance(n, str)]
        if bad:
            raise TypeError(f"evaluate_many: run names must be str, got {bad[0]!r}")
        return names
    if isinstance(runs, str | bytes | bytearray | memoryview | os.PathLike) or \
            not isinstance(runs, Sequence):
        raise TypeError("evaluate_many: runs must be a mapping {name: run} or a sequence of "
                        f"runs (a list or tuple), got {type(runs).__name__}")
    return run_names([_path_of(run) for run in runs])


def iter_evaluations(qrels: Any, runs: Mapping[str, Any] | Sequence[Any],
                     measures: list[str] | str | None = None,
                     **options: Any) -> Iterator[tuple[str, Evaluation]]:
    """:func:`evaluate_many` one run at a time: ``(name, Evaluation)`` as each run is
    evaluated (a run's error is raised when its turn comes, after the runs before it were
    yielded). The swapped-arguments checks, the options, the measures and the qrels are
    settled before the first run is read."""
    refuse_swapped_runs(qrels, runs, CALL, FORM)
    names = run_names_of(runs)
    sources = list(runs.values()) if isinstance(runs, Mapping) else list(runs)
    for run in sources:  # a cheap look at each (never a parse), as evaluate takes it
        refuse_swapped(qrels, run, CALL, FORM)
    gains = declared_gains(qrels, options.get("profile"), options.get("gains"))
    if gains is not None:
        options = {**options, "gains": gains}
    plan = plan_evaluation(measures, **options)
    qrels_obj = None
    if plan.qrels_format == "qrels":  # (-R's judgment groups and preferences: run by run)
        if plan.diversity:  # (a Qrels declaring real gains: refused as evaluate refuses it)
            real_gains.refuse_real_diversity(qrels, plan.instances, plan.gains)
        qrels_obj = _read_qrels_once(qrels, plan, names, sources)
    passes = _text_passes(plan, qrels_obj, sources)
    try:
        for name, run, passed in zip(names, sources, passes, strict=True):
            try:
                if qrels_obj is None:
                    ev = evaluate(qrels, run, measures, **options)
                elif plan.diversity:
                    ev = evaluate_diversity(qrels_obj, read_run(run), plan.instances,
                                            dict(plan.options), plan.require_overlap, plan.zs,
                                            plan.md, plan.gains)
                else:
                    ev = evaluate_read(plan, qrels_obj,
                                       read_run(run) if passed is None else passed)
                del passed
            except CranfieldError as exc:
                _name_the_run(exc, name)
                raise
            yield name, ev
    finally:
        passes.close()


def _read_qrels_once(qrels: Any, plan, names: list[str], sources: list):
    """The qrels every run is evaluated against: subtopic qrels for diversity measures, else
    as evaluate reads them (:func:`cranfield.evaluate.judged_qrels`). If they cannot be read,
    the first run is read first, as evaluate reads it (``qrels_before_run``; diversity reads
    the run first): with both bad, the run's problem is the one raised, naming the run."""
    try:
        if plan.diversity:
            return real_gains.subtopic_grades(read_qrels(qrels, diversity=True),
                                              plan.instances, plan.gains)
        return judged_qrels(qrels, plan.gains)
    except Exception as exc:
        failed = exc
    if sources:
        try:
            read_run(sources[0])  # raises the run's own error, if it has one
        except CranfieldError as exc:
            _name_the_run(exc, names[0])
            raise
    raise failed


# Threads reading and ranking run files ahead of the evaluations (the compiled pass lets the
# GIL go): at most this many, and no more than the cores this process may use.
PASS_THREADS = 2


def pass_threads() -> int:
    """How many threads :func:`iter_evaluations` runs the text pass on: :data:`PASS_THREADS`,
    at most the cores this process may run on (bench/engine_many.py prints it)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # (not on every platform)
        cores = os.cpu_count() or 1
    return max(1, min(PASS_THREADS, cores))


def _text_passes(plan, qrels_obj, sources: list) -> Iterator[PassedRun | None]:
    """For each run in turn: the :class:`PassedRun` the compiled text pass makes of it
    (:mod:`cranfield.inputs.text_pass`: a run file read and ranked against the qrels indexed
    once), or None where the pass does not apply or declines (read_run then reads the run, and
    names any problem, as evaluate does). With several runs, threads run the passes of the next
    runs while the current one is evaluated; the answers come in the runs' order, and each
    equals what read_run and rank_run make of the run (tests/engine/test_many_text_pass.py)."""
    table = None
    if qrels_obj is not None and not plan.diversity and len(qrels_obj):
        table = qrels_table(qrels_obj)
    if table is None:
        yield from (None for _ in sources)
        return
    instances = plan.instances
    cutoffs = sorted({int(i.value) for i in instances if i.measure.kind == "cutoffs"})
    # (as evaluate_read asks rank_run for them: a different answer only costs the pass)
    work = partial(_pass_or_none, partial(
        pass_run, table, float32=PROFILES[plan.options["profile"]].float32_scores,
        tie_cutoffs=tuple(k for k in cutoffs if k <= 1000),
        tie_work=(TIE_WORK_PER_ROW, TIE_WORK_MIN), reread=read_run))
    threads = pass_threads()
    if threads < 2 or len(sources) < 2:
        yield from (work(run) for run in sources)
        return
    from concurrent.futures import ThreadPoolExecutor  # (here: cranfield eval QRELS RUN's
    # start-up does not pay for it)

    with ThreadPoolExecutor(threads, thread_name_prefix="cranfield-text-pass") as pool:
        ahead = iter(sources)
        pending = deque(pool.submit(work, run) for run in islice(ahead, threads))
        try:
            while pending:
                done = pending.popleft()
                for run in islice(ahead, 1):
                    pending.append(pool.submit(work, run))
                yield done.result()
        finally:
            for future in pending:
                future.cancel()


def _pass_or_none(work, run) -> PassedRun | None:
    """``work(run)`` (:func:`pass_run`), or None where it fails (no memory for the pass's
    tables, anything unexpected): the pass is optional, and read_run then reads the run, or
    raises evaluate's own error for it, named as every run's error is."""
    try:
        return work(run)
    except Exception:  # (MemoryError is one: read_run, which streams, may yet read the run)
        return None


def _name_the_run(exc: CranfieldError, name: str) -> None:
    """evaluate's own error for run ``name``, made to name it: an input error about a run
    read from anything but a file (which evaluate calls ``run``: ``run.q1.d3``, ``run:4``) is
    about ``name`` instead (``bm25.q1.d3``; a file keeps its path); every error gets ``run``
    (the name) and a note saying it."""
    if getattr(exc, "run", None) is not None:
        return
    if isinstance(exc, InputError) and exc.source == "run":
        exc.source = name
        if exc.field == "run" or (exc.field or "").startswith("run."):
            exc.field = name + exc.field[3:]
        exc.args = (exc.describe(),)
    exc.run = name
    exc.add_note(f"(while evaluating run {name!r})")


def _path_of(run: Any) -> str | None:
    """The file path a run names, else None: a PathLike, or a one-line str the reader takes
    for a path (a file's, or one missing: fewer than four fields, as the reader tells "no
    such file" from a line of text)."""
    path = path_candidate(run)
    if path is None or isinstance(run, os.PathLike):
        return path
    return path if path.strip() and len(path.split()) < 4 else None
