"""The qrels are read before the run (issue #30: the qrels reader's transient memory comes
and goes before the run's columns exist) and the run is let go of once ranked, yet the
refusals keep their order: with both inputs bad, the run's problem is the one named, as when
the run was read first; a bad measure name comes after a bad run, before bad qrels' problem
on the command line, as before."""

from __future__ import annotations

import importlib
import weakref
from pathlib import Path

import pytest

import cranfield
from cranfield.cli import main
from cranfield.errors import InputError
from cranfield.inputs import io as cio

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
GOOD_RUN = "q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\n"
GOOD_QRELS = "q1 0 d1 1\nq1 0 d2 0\n"
BAD_RUN = "q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 x r\n"        # a score that is no number (line 2)
BAD_QRELS = "q1 0 d1 1\nq1 0 d2 high\n"               # a grade that is no integer (line 2)

EVALUATE = importlib.import_module("cranfield.evaluate")  # (the module, not the function)


@pytest.fixture(params=["line reader", "fast reader"])
def reader(request, monkeypatch):
    """Both TREC readers: the line reader (small files) and the fast ones (every size)."""
    if request.param == "fast reader":
        monkeypatch.setattr(cio, "FAST_READER_MIN_BYTES", 0)
    return request.param


def files(tmp_path: Path, qrels: str, run: str) -> tuple[str, str]:
    (tmp_path / "qrels").write_text(qrels)
    (tmp_path / "run").write_text(run)
    return str(tmp_path / "qrels"), str(tmp_path / "run")


@pytest.mark.parametrize("qrels, run, bad", [
    (BAD_QRELS, BAD_RUN, "run"),
    (GOOD_QRELS, BAD_RUN, "run"),
    (BAD_QRELS, GOOD_RUN, "qrels"),
])
def test_evaluate_names_the_run_first(tmp_path, reader, qrels, run, bad):
    q, r = files(tmp_path, qrels, run)
    with pytest.raises(InputError) as got:
        cranfield.evaluate(q, r, ["map"])
    assert (got.value.source, got.value.line) == ({"qrels": q, "run": r}[bad], 2)
    context = got.value.__context__  # (not raised while handling the other's error)
    assert not isinstance(context, InputError) or context.source == got.value.source


@pytest.mark.parametrize("qrels, run, bad", [
    (BAD_QRELS, BAD_RUN, "run"),
    (GOOD_QRELS, BAD_RUN, "run"),
    (BAD_QRELS, GOOD_RUN, "qrels"),
])
def test_the_command_line_names_the_run_first(tmp_path, capsys, reader, qrels, run, bad):
    q, r = files(tmp_path, qrels, run)
    code = main(["eval", "-m", "map", q, r])
    err = capsys.readouterr().err
    assert code != 0
    assert ({"qrels": q, "run": r}[bad] + ":2:") in err
    assert ({"qrels": r, "run": q}[bad] + ":") not in err


def test_a_bad_measure_comes_after_a_bad_run_and_before_bad_qrels(tmp_path, capsys):
    q, r = files(tmp_path, BAD_QRELS, BAD_RUN)
    assert main(["eval", "-m", "no_such_measure", q, r]) != 0
    err = capsys.readouterr().err
    assert r + ":2:" in err and "no_such_measure" not in err
    q, r = files(tmp_path, BAD_QRELS, GOOD_RUN)
    assert main(["eval", "-m", "no_such_measure", q, r]) != 0
    err = capsys.readouterr().err
    assert "no_such_measure" in err and q + ":" not in err


def test_swapped_files_are_still_said_to_be_swapped(tmp_path, capsys):
    q, r = files(tmp_path, GOOD_QRELS, GOOD_RUN)
    code = main(["eval", r, q])
    assert code != 0 and "takes QRELS first" in capsys.readouterr().err


def _watch_the_run(monkeypatch) -> dict:
    """Patches evaluate's ranking to keep a weak reference to the run it ranks, and its last
    step to note whether that run was still alive then."""
    seen: dict = {}
    rank_run, finish = EVALUATE.rank_run, EVALUATE.finish_evaluation

    def ranking(run, *args, **kwargs):
        seen["run"] = weakref.ref(run)
        return rank_run(run, *args, **kwargs)

    def finishing(*args, **kwargs):
        seen["alive"] = seen["run"]() is not None
        return finish(*args, **kwargs)

    monkeypatch.setattr(EVALUATE, "rank_run", ranking)
    monkeypatch.setattr(EVALUATE, "finish_evaluation", finishing)
    return seen


def test_evaluate_lets_the_run_go_once_ranked(monkeypatch, reader):
    seen = _watch_the_run(monkeypatch)
    ev = cranfield.evaluate(str(DATA / "qrels.test"), str(DATA / "results.test"), ["map"])
    assert seen["alive"] is False
    assert ev.runid and ev.topics.evaluated  # (topics and runid kept)


def test_the_command_line_lets_the_run_go_once_ranked(monkeypatch, capsys, reader):
    seen = _watch_the_run(monkeypatch)
    assert main(["eval", "-m", "map", str(DATA / "qrels.test"),
                 str(DATA / "results.test")]) == 0
    assert seen["alive"] is False
    assert "map" in capsys.readouterr().out


def test_a_run_the_caller_holds_is_left_whole(monkeypatch):
    seen = _watch_the_run(monkeypatch)
    run = cranfield.read_run(str(DATA / "results.test"))
    cranfield.evaluate(str(DATA / "qrels.test"), run, ["map"])
    assert seen["alive"] is True and len(run.scores) == len(run)
