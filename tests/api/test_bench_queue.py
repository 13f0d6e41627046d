"""bench/queue.py --drain checks each drained job's outcome against an in-process evaluation:
if the shard/combine jobs' outcome or the result document changes shape, the benchmark must
fail here rather than report a drain of failed jobs as a speed-up. Shards and combine run in
process on a MemoryStore, as the workers run them on Redis."""

from __future__ import annotations

import copy
import hashlib
import shutil
from pathlib import Path

import pytest

from backend.contract import CombineJob, QrelsInput, ShardJob
from backend.store import MemoryStore
from backend.tasks import run_combine, run_shard
from bench.queue import MEASURES, check, reference
from cranfield.inputs.trec_source import split_trec_text

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
OPTIONS = {"profile": "trec_eval-9.0.8", "relevance_level": 1, "judged_only": False,
           "depth": None, "complete_topics": False, "collection_size": 0,
           "aggregation": "macro"}


@pytest.fixture(scope="module")
def drained(tmp_path_factory):
    """(a sharded job's outcome, the bench's in-process reference) for NIST's test files."""
    folder = tmp_path_factory.mktemp("queue")
    shutil.copy(DATA / "results.test", folder / "run.txt")
    shutil.copy(DATA / "qrels.test", folder / "qrels.txt")
    text = (folder / "run.txt").read_bytes()
    store = MemoryStore()
    qrels = QrelsInput(key=store.put_blob("qrels", (folder / "qrels.txt").read_bytes(), 60))
    pieces = split_trec_text(text, 3)
    assert len(pieces) > 1
    keys = [store.put_blob(f"run-{i}", p, 60) for i, p in enumerate(pieces)]
    common = {"measures": MEASURES, "options": OPTIONS, "qrels": qrels}
    shards = [run_shard(store, ShardJob(**common, run_key=k, shard=i))
              for i, k in enumerate(keys)]
    outcome = run_combine(store, CombineJob(**common, run_sha256=hashlib.sha256(text)
                                            .hexdigest(), shard_keys=keys), shards)
    return outcome, reference(folder, outcome["result"]["provenance"]["options"])


def test_a_correct_drain_passes(drained):
    outcome, ref = drained
    assert check({"results": [outcome, copy.deepcopy(outcome)]}, ref) == (2, True)


@pytest.mark.parametrize("spoil", ["problem", "aggregate", "per_topic", "sha256"])
def test_a_wrong_or_failed_job_is_refused(drained, spoil):
    outcome, ref = drained
    bad = copy.deepcopy(outcome)
    doc = bad["result"]
    if spoil == "problem":
        bad = {"problem": {"status": 500, "title": "Job crashed"}}
    elif spoil == "aggregate":
        doc["aggregate"]["map"] += 1e-6
    elif spoil == "per_topic":
        topic = next(iter(doc["per_topic"]))
        doc["per_topic"][topic]["map"] = 0.5 if doc["per_topic"][topic]["map"] != 0.5 else 0
    else:
        doc["provenance"]["run_sha256"] = "0" * 64
    with pytest.raises(RuntimeError):
        check({"results": [bad, outcome]}, ref)
