"""trec_eval's text of an evaluation against judgment groups or preferences
(:class:`cranfield.measures.jg_measures.JgEvaluation`): :func:`format_jg`, what ``cranfield eval -R
FORMAT`` prints.

Room: reports.
"""

from __future__ import annotations

from ..measures.jg_measures import JgEvaluation

__all__ = ["format_jg"]


def _num(ev: JgEvaluation, name: str, value: float) -> str:
    return str(int(value)) if name in ev.counts else f"{value:6.4f}"  # C's %6.4f: "   inf"


def format_jg(ev: JgEvaluation, per_topic: bool = False, summary: bool = True) -> str:
    """trec_eval's text: ``%-22s\\t%s\\t%.4f`` lines, topics first, then runid, num_q and
    the means."""
    lines = []
    if per_topic:
        for topic, values in ev.per_topic.items():
            lines += [f"{k:<22}\t{topic}\t{_num(ev, k, values[k])}" for k in ev.names]
    if summary:
        if "runid" in ev.header:
            lines.append(f"{'runid':<22}\tall\t{ev.runid}")
        if "num_q" in ev.header:
            num_q = len(ev.per_topic) if ev.num_q is None else ev.num_q
            lines.append(f"{'num_q':<22}\tall\t{num_q}")
        lines += [f"{k:<22}\tall\t{_num(ev, k, v)}" for k, v in ev.summary().items()]
    return "".join(line + "\n" for line in lines)
