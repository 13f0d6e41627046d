"""The job contract: what a queued job carries, built and read here and nowhere else.

A job carries references — blob keys, a stored qrels version — never the inputs. On the
queue a spec travels as a plain dict (``to_wire``: JSON-safe, independent of these classes'
pickles) with its ``kind`` and ``version``; ``from_wire`` reads it back and refuses, with
:class:`SpecError`, a kind or version this code does not know (a worker older or newer
than the API that queued the job), rather than misreading it.

Also here: the queue's name and the dotted paths of the RQ entry points (``worker.jobs``;
paths, never imports, so the web service does not load the worker)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

QUEUE = "cranfield"

EVALUATE_FUNCTION = "worker.jobs.evaluate_job"
SHARD_FUNCTION = "worker.jobs.evaluate_shard_job"
COMBINE_FUNCTION = "worker.jobs.combine_shards_job"
COMPARE_FUNCTION = "worker.jobs.compare_job"
POOL_FUNCTION = "worker.jobs.pool_job"
BATCH_FUNCTION = "worker.jobs.evaluate_batch_job"

#: The version of the specs this code writes and reads. Bump it when a field changes meaning
#: or a required field is added; a worker refuses a version it does not know.
SPEC_VERSION = 7  # 3: EvaluationJob.record; 4: ComparisonJob.runs may name a result_id (#18);
#                  5: Job.table_bounds; 6: Job.job_id (#25); 7: Job.topic_metadata_version (#28)


#: How many times RQ runs a job at most: a worker that dies mid-job (SIGKILL, OOM) leaves it
#: to another worker, twice.
JOB_ATTEMPTS = 3


def job_options(job_timeout: int, result_ttl: int, queued_ttl: int) -> tuple[dict, dict]:
    """(a queued job's RQ options, a shard job's): the job's timeout, how long its result
    and its failure are kept, how long it may wait queued, and its retries. A shard's
    result is kept until the combine step that reads it can no longer be waiting: past its
    siblings' wait in the queue and their attempts (:data:`JOB_ATTEMPTS`), however short
    ``result_ttl`` is (a shard gone would fail the combine, or read as the job lost). One
    definition for every sharded job: an evaluation's (``backend.queue``) and a re-score's
    (``backend.rescoring``)."""
    from rq import Retry

    common = {"timeout": job_timeout, "result_ttl": result_ttl, "failure_ttl": result_ttl,
              "ttl": queued_ttl, "retry": Retry(max=JOB_ATTEMPTS - 1)}
    shard = dict(common, result_ttl=max(result_ttl, queued_ttl + JOB_ATTEMPTS * job_timeout))
    return common, shard


class SpecError(ValueError):
    """A job spec this code cannot read: unknown kind or version, a field missing or unknown."""


def table_bounds(config: dict) -> dict[str, int | None]:
    """:attr:`Job.table_bounds` under the app's limits: a run's rows at most MAX_TOPICS x
    MAX_DOCS_PER_TOPIC (qrels' judgments per topic are not limited), uncompressed bytes at
    most MAX_CONTENT_LENGTH (what the same data as text could weigh)."""
    topics, docs = config.get("MAX_TOPICS"), config.get("MAX_DOCS_PER_TOPIC")
    return {"max_rows": topics * docs if topics and docs else None,
            "max_bytes": config.get("MAX_CONTENT_LENGTH"),
            "max_memory": config.get("TABLE_MAX_MEMORY")}


def bounds_for(bounds: dict | None, kind: str) -> dict[str, int | None]:
    """The bounds an Arrow or Parquet ``kind`` (``run``/``qrels``) is read within, out of
    :func:`table_bounds`' (None: unbounded): qrels' rows are not limited."""
    bounds = bounds or {}
    return {"max_rows": bounds.get("max_rows") if kind == "run" else None,
            "max_bytes": bounds.get("max_bytes"), "max_memory": bounds.get("max_memory")}


@dataclass(kw_only=True)
class QrelsInput:
    """The qrels a job reads: a stored version (``ref`` = ``id@version``, read through the
    tenant's store) or inline qrels put under a blob ``key`` (``format`` ``trec`` or
    ``json``; ``sha256`` of the text as sent, for TREC text)."""
    ref: str | None = None
    key: str | None = None
    format: str = "trec"
    sha256: str | None = None


@dataclass(kw_only=True)
class Job:
    """What every job carries: who asked (tenant, request id for the logs), what to compute
    (measures, engine options) and what the result document includes."""
    kind: ClassVar[str]
    measures: list[str]
    options: dict[str, Any]
    qrels: QrelsInput | None = None
    per_topic: bool = True
    details: bool = False
    details_depth: int = 10
    latency_ms: dict[str, float] | None = None
    curves: bool = False
    tenant: str | None = None
    request_id: str | None = None
    #: the bounds an Arrow or Parquet input (run or qrels) is read within, checked from its
    #: metadata before anything is decompressed: ``{"max_rows": a run's rows, "max_bytes":
    #: uncompressed}`` (:func:`table_bounds` of the app's limits; the queue stamps them on
    #: submission). None: unbounded (a spec built outside the queue)
    table_bounds: dict[str, int | None] | None = None
    #: the work budgets the job is held to before it works (issue #27), stamped by the queue
    #: on submission (``backend.config.work_bounds``): ``max_measure_instances``,
    #: ``max_evaluation_values``, ``max_pool_work``. None: unbounded
    work_bounds: dict[str, int | None] | None = None
    #: the id of the queued job this spec runs as (a shard's: its evaluation's), stamped by
    #: the queue on submission: what a job records is recorded once per job id, however often
    #: the recording is retried (a database outage, a worker killed after it recorded).
    #: None: not queued (a synchronous request), no retry
    job_id: str | None = None
    #: the stored topic metadata (``id@version``) the job's ``options["topic_metadata"]``
    #: holds, pinned at submission (issue #28): its documents' ``provenance`` names it.
    #: None: inline metadata, or none
    topic_metadata_version: str | None = None
    version: int = SPEC_VERSION

    def document_settings(self) -> dict[str, Any]:
        """What ``evaluation_document`` reads: per-topic rows, latencies, curves. A job that
        records its result builds the per-topic rows even if its answer leaves them out
        (``backend.tasks.record_evaluation`` removes them once recorded)."""
        record = getattr(self, "record", None)
        return {"per_topic": self.per_topic or record is not None,
                "latency_ms": self.latency_ms, "curves": self.curves}

    def to_wire(self) -> dict[str, Any]:
        return {"kind": self.kind, **dataclasses.asdict(self)}

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> Job:
        """The spec ``wire`` holds, as the class its ``kind`` names (this class or one of its
        subclasses); :class:`SpecError` if this code cannot read it."""
        if not isinstance(wire, dict):
            raise SpecError(f"a job spec is a mapping, not {type(wire).__name__}")
        kind, version = wire.get("kind"), wire.get("version")
        target = _KINDS.get(kind)
        if target is None or (cls is not Job and target is not cls):
            raise SpecError(f"unknown job kind {kind!r}")
        if version != SPEC_VERSION:
            raise SpecError(f"job spec version {version!r}: this worker reads version "
                            f"{SPEC_VERSION} (API and workers must run the same release)")
        names = {f.name for f in dataclasses.fields(target)}
        values = {k: v for k, v in wire.items() if k != "kind"}
        unknown = sorted(set(values) - names)
        if unknown:
            raise SpecError(f"job spec of kind {kind!r} has unknown fields {unknown}")
        if isinstance(values.get("qrels"), dict):
            values["qrels"] = QrelsInput(**values["qrels"])
        try:
            return target(**values)
        except TypeError as exc:
            raise SpecError(f"job spec of kind {kind!r}: {exc}") from None


@dataclass(kw_only=True)
class EvaluationJob(Job):
    """One run against one qrels. ``run_format``: ``trec`` (text as sent) or ``json`` (a
    mapping); ``run_sha256`` when the API already hashed the run. ``record``: keep the result
    as ``{"system", "label", "commit"?, "tags"?}`` in the results store (issue #18), else
    None."""
    kind: ClassVar[str] = "evaluation"
    run_key: str | None = None
    run_format: str = "trec"
    run_sha256: str | None = None
    record: dict[str, Any] | None = None


@dataclass(kw_only=True)
class ShardJob(EvaluationJob):
    """One piece of a large TREC run, cut at topic boundaries (``shard``: its index)."""
    kind: ClassVar[str] = "shard"
    shard: int = 0


@dataclass(kw_only=True)
class CombineJob(EvaluationJob):
    """Merges the shards' results (``shard_ids``: their jobs, ``shard_keys``: their pieces,
    in order) into the evaluation's document; its id is the evaluation's job id."""
    kind: ClassVar[str] = "combine"
    shard_ids: list[str] = field(default_factory=list)
    shard_keys: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class ComparisonJob(Job):
    """Two or more runs against one qrels. ``runs``: ``{"name", "run_key", "run_format"}``
    for an inline run, ``{"name", "evaluation_id"}`` for a finished evaluation, ``{"name",
    "result_id"}`` for a recorded result (read through :mod:`backend.results_access`; a
    ``"field"`` names the request field an error about it points at, ``baseline.system``
    for a system's pinned baseline); the rest are ``cranfield.compare.comparison``'s settings and
    the gate."""
    kind: ClassVar[str] = "comparison"
    runs: list[dict[str, str]] = field(default_factory=list)
    baseline: str | None = None
    tests: list[str] = field(default_factory=list)
    correction: str = "holm"
    alpha: float = 0.05
    n_permutations: int = 10_000
    n_samples: int = 10_000
    seed: int = 0
    largest_losses: int = 5
    gate: list[dict[str, Any]] | None = None

    #: the fields passed to ``cranfield.compare.comparison.compare_evaluations`` as keywords
    COMPARE_SETTINGS: ClassVar[tuple[str, ...]] = (
        "baseline", "tests", "correction", "alpha", "n_permutations", "n_samples", "seed",
        "largest_losses", "per_topic", "curves")

    def compare_settings(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.COMPARE_SETTINGS}


@dataclass(kw_only=True)
class PoolJob(Job):
    """The judging pool of runs at ``depth`` (issue #27: a large one is queued). ``runs``:
    ``{"name", "run_key", "run_format"}`` each; the qrels (optional), documents already
    judged; ``profile``: how scores are compared. ``measures``/``options`` are unused ([],
    {})."""
    kind: ClassVar[str] = "pool"
    runs: list[dict[str, str]] = field(default_factory=list)
    depth: int = 1
    profile: str = "trec_eval-9.0.8"


@dataclass(kw_only=True)
class BatchEvaluationJob(Job):
    """Several runs against one qrels (``POST /v1/evaluations/batch`` queued, issue #30):
    ``runs``, in the request's order, ``{"name", "run_key", "run_format"}`` each (every run's
    bytes under its own blob key); the qrels read once, every run evaluated by
    ``cranfield.evaluate_many``; the result the batch document the synchronous route
    answers."""
    kind: ClassVar[str] = "batch"
    runs: list[dict[str, str]] = field(default_factory=list)


_KINDS: dict[str, type[Job]] = {c.kind: c for c in (EvaluationJob, ShardJob, CombineJob,
                                                     ComparisonJob, PoolJob,
                                                     BatchEvaluationJob)}

#: The kind of job each entry point runs (telemetry labels jobs by it).
KIND_OF_FUNCTION = {EVALUATE_FUNCTION: "evaluation", SHARD_FUNCTION: "shard",
                    COMBINE_FUNCTION: "combine", COMPARE_FUNCTION: "comparison",
                    POOL_FUNCTION: "pool", BATCH_FUNCTION: "batch"}
