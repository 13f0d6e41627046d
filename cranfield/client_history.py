"""The client's calls on a service's history under changing judgments (issue #31): whether the
conclusions hold (``GET /v1/stability``) and re-scoring kept runs (``POST
/v1/systems/{name}/rescore``, ``POST /v1/rescores``, ``GET /v1/rescores/{id}``).

:class:`HistoryCalls` is a mixin of :class:`cranfield.client.Client`: it uses the client's
``request`` and ``_json``. Room: the top (interfaces).
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

#: the query parameters of ``GET /v1/stability`` besides measure, from and to
STABILITY_OPTIONS = ("test", "correction", "alpha", "level", "persistence", "resamples",
                     "permutations", "seed")


def _name(text: str) -> str:
    return urllib.parse.quote(text, safe="")


class HistoryCalls:
    """Stability and re-scoring, mixed into :class:`cranfield.client.Client`."""

    def stability(self, measure: str, from_version: str, to_version: str, *,
                  accept: str = "application/json", **options: Any) -> Any:
        """``GET /v1/stability`` (issue #31): do the conclusions drawn under qrels
        ``from_version`` (``ID@VERSION``, the truth) hold under ``to_version``? The ranking
        of the caller's systems by ``measure``: Kendall's τ_b, τ_AP and RBO with bootstrap
        intervals, and the pairs whose significant difference appeared, vanished or flipped.
        ``options``: the route's ``test``, ``correction``, ``alpha``, ``level``,
        ``persistence``, ``resamples``, ``permutations``, ``seed``. Returns the document, or
        for ``accept="text/plain"`` its text (``text/html``: the stability page)."""
        unknown = sorted(set(options) - set(STABILITY_OPTIONS))
        if unknown:
            raise TypeError(f"stability: unknown option {unknown[0]!r} (options: "
                            f"{', '.join(STABILITY_OPTIONS)})")
        query = {"measure": measure, "from": from_version, "to": to_version,
                 **{k: v for k, v in options.items() if v is not None}}
        path = "/v1/stability?" + urllib.parse.urlencode(query)
        _, _, raw = self.request("GET", path, headers={"Accept": accept})
        return json.loads(raw) if accept == "application/json" else raw.decode("utf-8")

    def rescore(self, systems: str | list[str], qrels_id: str, *, wait: bool = False,
                progress: Callable[[dict], None] | None = None,
                timeout: float | None = None) -> dict:
        """Re-score the kept runs of ``systems`` (a name, or names) under stored qrels
        ``qrels_id`` (``ID@VERSION``; ``ID``: its latest version, pinned by the service):
        ``POST /v1/systems/{name}/rescore`` for one system, ``POST /v1/rescores`` for
        several. Returns the re-score (``id``, ``state``, ``total``, ``queued``, ``done``,
        ``failed``, ``skipped``, ``items``...); with ``wait``, once it has finished (polled
        by :meth:`wait_rescore`)."""
        names = [systems] if isinstance(systems, str) else list(systems)
        if not names:
            raise ValueError("rescore: name at least one system")
        if len(names) == 1:
            doc = self._json("POST", f"/v1/systems/{_name(names[0])}/rescore",
                             {"qrels_id": qrels_id})
        else:
            doc = self._json("POST", "/v1/rescores", {"qrels_id": qrels_id, "systems": names})
        if not wait:
            return doc
        if progress is not None:
            progress(doc)
        return self.wait_rescore(doc["id"], progress=progress, timeout=timeout, state=doc)

    def rescore_status(self, rescore_id: str) -> dict:
        """``GET /v1/rescores/{id}``: a re-score's progress (its items and their states)."""
        return self._json("GET", f"/v1/rescores/{_name(rescore_id)}")

    def wait_rescore(self, rescore_id: str, *, progress: Callable[[dict], None] | None = None,
                     timeout: float | None = None, state: dict | None = None,
                     poll: float = 0.2, max_poll: float = 2.0) -> dict:
        """Poll ``GET /v1/rescores/{id}`` until no item is queued (``state`` finished),
        telling ``progress(doc)`` each answer whose counts changed; TimeoutError after
        ``timeout`` seconds (default: the client's)."""
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        said = _counts(state) if state is not None else None
        delay = poll
        while state is None or state["state"] != "finished":
            if state is not None:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"re-score {rescore_id} still running after "
                                       f"{limit:g} s ({state['done']} of {state['total']} "
                                       "done)")
                time.sleep(delay)
                delay = min(delay * 1.5, max_poll)
            state = self.rescore_status(rescore_id)
            if progress is not None and _counts(state) != said:
                said = _counts(state)
                progress(state)
        return state


def _counts(doc: dict) -> tuple:
    return tuple(doc.get(k) for k in ("state", "queued", "done", "failed", "skipped"))
