"""The nightly regression story (issue #18), as one test, on real parts: gunicorn, an RQ
worker (`cranfield worker`) on a private Redis, a PostgreSQL database this module creates and
drops, the `cranfield` command line and headless Chromium.

Three nights of one search system are recorded — the first synchronously, the second through
the queue, the third from `cranfield eval --server … --record` — and the first is pinned as
the accepted baseline. Each later night is checked by a gate against the pinned baseline,
sending only its result id; the gate's verdict is kept with the result. The third night
loses on six topics: its gate fails naming exactly those, and the trend page, opened in
Chromium, shows the drop: the third point drawn below the others, in the failing colour,
under the baseline line.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from servers import CRANFIELD, ROOT, call, wait_job

sys.path.insert(0, str(ROOT / "tests" / "browser"))
from browser_tools import CHROMIUM, Chromium  # noqa: E402

TOPICS = [f"t{i:02d}" for i in range(1, 31)]
QRELS = {t: {"rel": 1} for t in TOPICS}
LOST = {"t03", "t08", "t11", "t17", "t23", "t29"}        # night 3 ranks "rel" second on these
SLIP = {"t05"}                                          # night 2: one topic, within the gate


def _run(worse_on: set[str]) -> dict:
    return {t: ({"rel": 1.0, "other": 2.0} if t in worse_on else {"rel": 2.0, "other": 1.0})
            for t in TOPICS}


def _trec_text(run: dict) -> str:
    return "".join(f"{t} Q0 {d} {i + 1} {s} night3\n" for t, docs in run.items()
                   for i, (d, s) in enumerate(sorted(docs.items(), key=lambda x: -x[1])))


@pytest.fixture(scope="module")
def api(results_api):  # conftest: gunicorn on this module's PostgreSQL and Redis
    return results_api


@pytest.fixture
def worker(results_worker):
    return results_worker


@pytest.fixture
def chromium(tmp_path, require):
    require(os.access(CHROMIUM, os.X_OK),
            f"{CHROMIUM} (make system-deps; or apt-get install -y chromium)")
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    return Chromium(CHROMIUM, profile)


def _gate(api: str, result_id: str) -> dict:
    """Tonight's recorded result against the pinned baseline: only its id is sent."""
    status, headers, job = call(api, "POST", "/v1/comparisons", {
        "runs": [{"result_id": result_id}], "measures": ["map", "P.1"],
        "baseline": {"system": "search"}, "gate": "map:0.05"}, {"Prefer": "respond-async"})
    assert status == 202, job
    done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done.get("problem") or done
    return done["result"]["gate"]


def _marks(image, rgb, *, round_: bool) -> list[tuple[float, float]]:
    """The centres (row, column) of the screenshot's blobs of exactly this colour that are
    round marks (8-20 px across, as high as wide, not filling their box) or, with
    ``round_=False``, dashes (at most 4 px high, 4-20 px long)."""
    from scipy import ndimage

    labels, n = ndimage.label(np.all(image.pixels == np.array(rgb, np.uint8), axis=-1))
    found = []
    for i, box in enumerate(ndimage.find_objects(labels), start=1):
        h, w = box[0].stop - box[0].start, box[1].stop - box[1].start
        fill = (labels[box] == i).mean()
        if (round_ and 8 <= h <= 20 and abs(h - w) <= 2 and fill < 0.9) or (
                not round_ and h <= 4 and 4 <= w <= 20):
            rows, cols = np.nonzero(labels[box] == i)
            found.append((box[0].start + rows.mean(), box[1].start + cols.mean()))
    return found


def test_the_nightly_story(api, worker, chromium, tmp_path):
    # the team's judgments, stored once: every night is evaluated against the same version
    status, _, stored = call(api, "PUT", "/v1/qrels/story", {"qrels": QRELS})
    assert status in (200, 201), stored
    body = {"qrels_id": "story", "measures": ["map", "P.1"]}
    # night 1, synchronously: the version the team accepted
    status, _, night1 = call(api, "POST", "/v1/evaluations", {
        **body, "run": _run(set()), "record": {"system": "search", "label": "night-1",
                                               "commit": "a1"}})
    assert status == 200, night1
    n1 = night1["recorded"]["id"]
    status, _, pinned = call(api, "PUT", "/v1/systems/search/baseline", {"result_id": n1})
    assert status == 200 and pinned["id"] == n1
    # night 2, through the queue: one topic slips, the gate lets it pass
    status, headers, job = call(api, "POST", "/v1/evaluations", {
        **body, "run": _run(SLIP), "record": {"system": "search", "label": "night-2",
                                              "commit": "b2"}}, {"Prefer": "respond-async"})
    assert status == 202, job
    done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done
    n2 = done["result"]["recorded"]["id"]
    gate2 = _gate(api, n2)
    assert gate2["verdict"] == "pass" and gate2["recorded"] == [{"result_id": n2,
                                                                  "verdict": "pass"}]
    # night 3, from the command line: six topics lost
    run_file = tmp_path / "night3.txt"
    run_file.write_text(_trec_text(_run(LOST)))
    done = subprocess.run([CRANFIELD, "eval", "--server", api, "-m", "map", "-m", "P.1",
                           "--qrels-id", "story", "--record",
                           "system=search,label=night-3,commit=c3", "-", str(run_file)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    status, _, listed = call(api, "GET", "/v1/systems/search/results")
    assert [r["label"] for r in listed["items"]] == ["night-3", "night-2", "night-1"]
    assert {r["qrels_version"] for r in listed["items"]} == {f"story@{stored['version']}"}
    n3 = listed["items"][0]["id"]
    gate3 = _gate(api, n3)
    assert gate3["verdict"] == "fail"
    (check,) = gate3["checks"]
    assert check["candidate"] == "search@night-3" and check["baseline"] == "search@night-1"
    assert {t["topic"] for t in check["offending_topics"]} == LOST
    assert check["drop"] == pytest.approx(0.5 * len(LOST) / len(TOPICS))

    # the trend: the means, the verdicts, the baseline
    status, _, trend = call(api, "GET", "/v1/systems/search/trend?measure=map")
    assert status == 200, trend
    assert [p["label"] for p in trend["points"]] == ["night-1", "night-2", "night-3"]
    assert [p["mean"] for p in trend["points"]] == [
        pytest.approx(1.0), pytest.approx(1 - 0.5 / 30), pytest.approx(1 - 0.5 * 6 / 30)]
    assert [(p["gate"] or {}).get("verdict") for p in trend["points"]] == [None, "pass", "fail"]
    assert trend["baseline"] == n1 and trend["baseline_point"]["mean"] == pytest.approx(1.0)

    # the page, as a person sees it in Chromium
    page_url = f"{api}/v1/systems/search/trend?measure=map"
    dom = chromium.dump_dom(page_url)
    assert dom.count('class="chart trend"') == 1
    assert 'data-verdict="fail"' in dom and f'data-id="{n3}"' in dom
    assert "Latest gate (night-3): FAIL" in dom
    assert all(t in dom for t in LOST)
    shot = chromium.screenshot(page_url, (1280, 1400))
    # what a person sees: a round mark in the failing colour, one in the passing colour,
    # and the baseline's dashes (the legend's swatches are squares, the gate box a frame)
    (fail,) = _marks(shot, (0xD5, 0x5E, 0x00), round_=True)
    (passed,) = _marks(shot, (0x00, 0x9E, 0x73), round_=True)
    dashes = _marks(shot, (0xCC, 0x79, 0xA7), round_=False)
    # the baseline's line: the row most dashes are on (the legend's swatch has two more)
    rows = np.round([row for row, _ in dashes])
    baseline_row = float(np.bincount(rows.astype(int)).argmax())
    line = [(row, col) for row, col in dashes if abs(row - baseline_row) <= 4]
    assert len(line) >= 10 and len(dashes) - len(line) <= 3
    assert max(abs(row - baseline_row) for row, _ in line) <= 2  # level
    # the drop: the third night's mark well below the second's (screen rows grow downwards)
    # and under the baseline, to the right of it
    assert fail[0] - passed[0] > 50 and fail[1] > passed[1]
    assert passed[0] > baseline_row and fail[0] - baseline_row > 80
