"""The Python documentation runs as written (issue #26): every ```python block of
docs/library.md and docs/from-other-tools.md is executed, page by page in one namespace (a
block may use what an earlier block of its page defined), from the repository root, and a
```text block right after a python block is the output it must print, byte for byte.

A block whose lines include ``# needs: NAME[, NAME]`` is only compiled unless NAME can be
imported: ``server`` never can (a running Cranfield service), ranx (the bench extra) often
cannot. pytrec_eval, ir_measures and scipy are test dependencies: a block needing them is
required to run (skipped locally without them, a failure under CI=true).

The measure tables of docs/from-other-tools.md are checked too: the names of a row give the
same per-topic numbers in Cranfield, and each peer that is installed gives Cranfield's number
for its own name of the row (pytrec_eval and ir_measures per topic on NIST's trec_eval files
and the TREC 2012 Web track; ranx's mean on NIST's binary qrels, the page saying where ranx
breaks ties its own way).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import cranfield

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["docs/library.md", "docs/from-other-tools.md"]
OTHER_TOOLS = ROOT / "docs" / "from-other-tools.md"
# peers installed with the test extra: a block needing one must run where the suite runs
REQUIRED = {"pytrec_eval", "ir_measures", "scipy"}
NEEDS = re.compile(r"^\s*#\s*needs:\s*(.+?)\s*$", re.MULTILINE)
NAME = re.compile(r"`([^`]+)`")
TOLERANCE = 1e-12
DATASETS = {
    "trec_eval": ("tests/data/trec_eval/qrels.test", "tests/data/trec_eval/results.test"),
    "web2012": ("tests/data/web2012/qrels.adhoc.txt",
                "tests/data/web2012/runs/ql/results-cata-filtered.txt"),
}


@dataclass(frozen=True)
class Block:
    page: str
    line: int             # the line of its opening fence, 1-based
    code: str
    output: str | None    # the ```text block right after it, if any

    @property
    def needs(self) -> set[str]:
        return {n.strip() for m in NEEDS.findall(self.code) for n in m.split(",") if n.strip()}

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def fenced(lines: list[str], start: int) -> tuple[str, int]:
    """The text of the fence opened at ``start`` and the index of its closing line."""
    end = start + 1
    while end < len(lines) and lines[end].rstrip() != "```":
        end += 1
    return "".join(line + "\n" for line in lines[start + 1:end]), end


def python_blocks(page: str) -> list[Block]:
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].rstrip() != "```python":
            i += 1
            continue
        code, end = fenced(lines, i)
        j = end + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        output = None
        if j < len(lines) and lines[j].rstrip() == "```text":
            output, end = fenced(lines, j)
        blocks.append(Block(page, i + 1, code, output))
        i = end + 1
    return blocks


def importable(name: str) -> bool:
    return name != "server" and importlib.util.find_spec(name) is not None


def test_the_pages_have_blocks_and_outputs():
    """The scan finds what it is meant to (a renamed fence must not make the test vacuous)."""
    for page in PAGES:
        blocks = python_blocks(page)
        assert len(blocks) >= 5, page
        assert sum(b.output is not None for b in blocks) >= 5, page
    assert any("server" in b.needs for b in python_blocks("docs/library.md"))


@pytest.mark.parametrize("page", PAGES)
def test_every_python_block_runs_and_prints_what_the_page_shows(page, monkeypatch, require):
    monkeypatch.chdir(ROOT)  # the examples name files relative to the repository root
    namespace: dict = {"__name__": "__docs__"}
    ran = 0
    for block in python_blocks(page):
        code = compile(block.code, block.where, "exec")  # every block at least compiles
        missing = sorted(n for n in block.needs if not importable(n))
        for name in missing:
            if name in REQUIRED:
                require(False, f"{name} is installed (the test extra), for {block.where}")
        if missing:
            continue
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(code, namespace)
        except Exception:
            pytest.fail(f"{block.where} raised:\n{traceback.format_exc()}", pytrace=False)
        ran += 1
        if block.output is not None:
            assert out.getvalue() == block.output, (
                f"{block.where} printed\n{out.getvalue()}\nwhere the page shows\n{block.output}")
    assert ran >= 5


# --------------------------------------------------------------------------------------------
# The measure tables of from-other-tools.md
# --------------------------------------------------------------------------------------------

def table(header_start: str) -> list[list[str]]:
    """The rows (cells as text) of the table whose header line starts with ``header_start``."""
    lines = OTHER_TOOLS.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def name_in(cell: str) -> str | None:
    found = NAME.findall(cell)
    return found[0] if found else None


@dataclass(frozen=True)
class Row:
    what: str
    trec_eval: str | None
    pytrec_key: str | None
    ir_measures: str | None
    ranx: str | None

    def names(self) -> list[str]:
        return [n for n in (self.trec_eval, self.ir_measures, self.ranx) if n]


MEASURE_ROWS = [Row(cells[0], *(name_in(c) for c in cells[1:5]))
                for cells in table("| measure | trec_eval `-m` |")]
RANX_ROWS = [(ranx, ours) for cells in table("| ranx | Cranfield |")
             for ranx, ours in zip(NAME.findall(cells[0]), NAME.findall(cells[1]), strict=True)]


def test_the_tables_are_found():
    assert len(MEASURE_ROWS) >= 15 and len(RANX_ROWS) >= 4
    assert all(len(r.names()) >= 2 for r in MEASURE_ROWS)


_inputs: dict[str, tuple[dict, dict]] = {}


def inputs(dataset: str) -> tuple[dict, dict]:
    """The dataset's qrels and run as the dicts pytrec_eval and ir_measures take."""
    if dataset not in _inputs:
        qrels, run = DATASETS[dataset]
        _inputs[dataset] = (cranfield.read_qrels(ROOT / qrels).to_dict(),
                            cranfield.read_run(ROOT / run).to_dict())
    return _inputs[dataset]


def per_topic(dataset: str, names: list[str]) -> cranfield.Evaluation:
    qrels, run = inputs(dataset)
    return cranfield.evaluate(qrels=qrels, run=run, measures=names)


def close(a, b) -> bool:
    return abs(float(a) - float(b)) <= TOLERANCE


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("row", MEASURE_ROWS, ids=lambda r: r.what)
def test_the_names_of_a_row_are_one_measure_in_cranfield(row, dataset):
    ev = per_topic(dataset, row.names())
    columns = {key: np.asarray(v, dtype=np.float64) for key, v in ev.values.items()}
    first = next(iter(columns.values()))
    for key, column in columns.items():
        np.testing.assert_allclose(column, first, rtol=0, atol=TOLERANCE, err_msg=key)
    if row.trec_eval and row.pytrec_key:  # trec_eval names report under their printed key
        assert row.pytrec_key in ev.values


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("row", [r for r in MEASURE_ROWS if r.trec_eval],
                         ids=lambda r: r.what)
def test_pytrec_eval_gives_the_row_s_numbers(row, dataset, require):
    require(importable("pytrec_eval"), "pytrec_eval is installed (the test extra)")
    import pytrec_eval

    qrels, run = inputs(dataset)
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {row.trec_eval}).evaluate(run)
    ours = per_topic(dataset, [row.trec_eval]).per_topic
    assert set(theirs) == set(ours)
    for topic, values in theirs.items():
        assert close(values[row.pytrec_key], ours[topic][row.pytrec_key]), topic


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("row", [r for r in MEASURE_ROWS if r.ir_measures],
                         ids=lambda r: r.what)
def test_ir_measures_gives_the_row_s_numbers(row, dataset, require):
    require(importable("ir_measures"), "ir_measures is installed (the test extra)")
    import ir_measures

    qrels, run = inputs(dataset)
    measure = ir_measures.parse_measure(row.ir_measures)
    theirs = {m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, run)}
    ours = per_topic(dataset, [row.ir_measures]).per_topic
    assert set(theirs) == set(ours)
    for topic, value in theirs.items():
        assert close(value, ours[topic][row.ir_measures]), topic


def ranx_mean(name: str) -> float:
    from ranx import Qrels, Run, evaluate

    qrels, run = DATASETS["trec_eval"]
    return float(evaluate(Qrels.from_file(str(ROOT / qrels), kind="trec"),
                          Run.from_file(str(ROOT / run), kind="trec"), name))


@pytest.mark.parametrize("row", [r for r in MEASURE_ROWS if r.ranx], ids=lambda r: r.what)
def test_ranx_gives_the_row_s_numbers(row):
    if not importable("ranx"):
        pytest.skip("ranx is not installed (the bench extra)")
    # ranx averages every measure over the topics (hits too, which trec_eval sums)
    ev = per_topic("trec_eval", [row.ranx])
    assert close(ranx_mean(row.ranx), np.mean(ev.values[row.ranx]))


@pytest.mark.parametrize("ranx_name, name", RANX_ROWS)
def test_ranx_only_spellings_are_the_cranfield_measures_named(ranx_name, name):
    for dataset in DATASETS:
        ev = per_topic(dataset, [ranx_name, name])
        np.testing.assert_allclose(ev.values[ranx_name], ev.values[name], rtol=0,
                                   atol=TOLERANCE)
    if importable("ranx"):
        assert close(ranx_mean(ranx_name), np.mean(per_topic("trec_eval", [name]).values[name]))
