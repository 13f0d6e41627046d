"""trec_eval's ``-Z`` applied: an evaluation's per-topic values replaced in place by their
z-scores against a reference table (:class:`cranfield.inputs.zscores.ZScores`, read by
:func:`cranfield.inputs.zscores.read_zscores`), each looked up by the name trec_eval prints for the
measure (:func:`cranfield.measures.printed_names.printed_lines`). Room: measures."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..inputs.zscores import ZScores

MIN_GEO_MEAN = 1e-5   # trec_eval.h: gm_* per-topic values are log(max(v, this))


def standardise(zs: ZScores, values: dict[str, np.ndarray], instances, topics: list[str],
                convert: np.ndarray) -> None:
    """Replace ``values`` (per measure key, one per topic of ``topics``) in place by their
    z-scores, for the topics where ``convert`` is true (the others keep their value: 9.0.8's
    never-evaluated ``-c`` topics); a topic without a value of a ``mean_reported`` measure
    (NaN: Accuracy's) keeps having none. Text measures (runid, relstring) are left as they are;
    ``gm_*`` are converted as trec_eval holds them, log(max(v, 1e-5))."""
    from .printed_names import printed_lines

    names = {inst.key: name for name, inst in printed_lines(instances)}
    rows = np.flatnonzero(convert).tolist()
    for inst in instances:
        if inst.measure.name in ("runid", "relstring"):
            continue
        raw = values[inst.key]
        if raw.dtype == object:
            continue
        name = names.get(inst.key, inst.key)
        out = raw.astype(np.float64)  # a copy: the caller's arrays may be shared
        gm = inst.measure.aggregate == "gmean"
        # a measure whose NaN is "no value" (Accuracy: aggregate mean_reported) keeps it: a
        # topic without a value has no z-score either (not trec_eval's MISSING), and the
        # summary stays the mean over the topics that have one
        no_value = inst.measure.aggregate == "mean_reported"
        for r in rows:
            v = float(out[r])
            if no_value and math.isnan(v):
                continue
            if gm:
                v = math.log(max(v, MIN_GEO_MEAN))
            out[r] = zs.z(topics[r], name, v)
        values[inst.key] = out
