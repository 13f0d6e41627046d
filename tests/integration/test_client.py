"""cranfield.client.Client and `cranfield eval --server` against gunicorn."""

from __future__ import annotations

import subprocess

import pytest
from servers import CRANFIELD, DATA, ROOT

from cranfield.client import ApiError, Client


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CRANFIELD, "eval", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


@pytest.mark.parametrize("flags", [[], ["-q", "-m", "all_trec"], ["-q", "-c", "-M100",
                                                                  "-m", "all_trec"]])
def test_server_flag_prints_what_local_evaluation_prints(live_server, flags):
    run = str(DATA / ("results.trunc" if "-c" in flags else "results.test"))
    local = cli(*flags, str(DATA / "qrels.test"), run)
    remote = cli("--server", live_server, *flags, str(DATA / "qrels.test"), run)
    assert local.returncode == remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout


def test_server_flag_reports_bad_input(live_server, tmp_path):
    bad = tmp_path / "run"
    bad.write_text("q1 Q0 d1 1 x r\n")
    done = cli("--server", live_server, str(DATA / "qrels.test"), str(bad))
    assert done.returncode == 2 and "run line 1" in done.stderr


def test_client_evaluates_stores_qrels_and_raises_problems(live_server):
    api = Client(live_server)
    meta = api.put_qrels("client-test", DATA / "qrels.test")
    assert meta["judgments"] == 3681
    doc = api.evaluate(run=DATA / "results.test", qrels_id="client-test", measures=["map", "P.5"])
    assert round(doc["aggregate"]["map"], 4) == 0.1785
    queued = api.evaluate(run=DATA / "results.test", qrels_id="client-test", measures=["map"],
                          prefer_async=True)
    assert queued["aggregate"]["map"] == doc["aggregate"]["map"]
    text = api.evaluate(DATA / "qrels.test", DATA / "results.test", per_topic=False,
                        accept="text/plain")
    assert text == (DATA / "v9.0.8" / "out.test").read_text()
    # per_topic unsaid: text/plain is cranfield eval's answer without -q, queued or not
    for prefer_async in (False, True):
        unsaid = api.evaluate(DATA / "qrels.test", DATA / "results.test", accept="text/plain",
                              prefer_async=prefer_async)
        assert unsaid == text
    with pytest.raises(ApiError) as info:
        api.evaluate({"q": {"d": 1}}, {"q": {"d": 1.0}}, measures=["mapp"])
    assert info.value.status == 422 and "measures[0]" in info.value.problem["errors"]
    api.delete_qrels("client-test")
    with pytest.raises(ApiError) as info:
        api.qrels("client-test")
    assert info.value.status == 404


def test_a_queued_text_evaluation_is_sent_once_and_fetched_as_text(live_server):
    """The bug of issue #25: a queued job asked for as text was POSTed again after it
    finished (for ever, for a large run). Now it is fetched as text from the job."""
    from test_cli_nightly_commands import uploads

    api = Client(live_server)
    sync = api.evaluate(DATA / "qrels.test", DATA / "results.test", accept="text/plain",
                        per_topic=True, measures=["all_trec"])
    before = uploads(live_server)
    queued = api.evaluate(DATA / "qrels.test", DATA / "results.test", accept="text/plain",
                          per_topic=True, measures=["all_trec"], prefer_async=True)
    assert uploads(live_server) - before == 1
    assert queued == sync and queued.job is not None
    csv = api.evaluate(DATA / "qrels.test", DATA / "results.test", accept="text/csv",
                       prefer_async=True, measures=["map"])
    assert csv.splitlines()[0] == "topic,map" and csv.splitlines()[-1].startswith("all,0.1785")
