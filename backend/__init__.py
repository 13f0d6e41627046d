"""Cranfield's middle: what the web service (``service/``) and the RQ workers (``worker/``)
both run — the qrels store, the job contract, the tasks behind every job, the queue, problem
documents and telemetry.

Layers point one way: ``cranfield`` (the engine) ← ``backend`` ← ``service`` and ``worker``.
Nothing here imports Flask, ``service`` or ``worker`` (tests/engine/test_import_rules.py)."""
