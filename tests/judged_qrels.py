"""Judged qrels (issue #31: trec_eval's judgment groups, a judge per group) for the tests of
every directory that put or read them (tests/api's judges, their CLI and columnar forms,
tests/engine's consensus): one judgment file and one way to make its rows and store it."""

from __future__ import annotations

#: three judges of two topics; alice and bob judged no document of 302 in common but d4
TEXT = """\
301 alice d1 2
301 bob d1 1
301 llm d1 2
301 alice d2 0
301 bob d2 0
301 llm d2 1
301 alice d5 1
301 bob d5 1
302 alice d3 1
302 llm d3 1
302 bob d4 0
302 llm d4 2
302 alice d4 0
"""


def rows(text: str = TEXT) -> list[dict]:
    """The judgments of ``text`` as row objects ``{topic, judge, docid, rel}``."""
    out = []
    for line in text.splitlines():
        t, j, d, r = line.split()
        out.append({"topic": t, "judge": j, "docid": d, "rel": int(r)})
    return out


def put_judged(client, qrels_id: str = "j", qrels=TEXT, **body) -> dict:
    """``PUT /v1/qrels/{qrels_id}`` of judged qrels (JSON, ``qrels_format`` qrels_jg) through
    a test client; the stored version's metadata."""
    resp = client.put(f"/v1/qrels/{qrels_id}",
                      json={"qrels": qrels, "qrels_format": "qrels_jg", **body})
    assert resp.status_code in (200, 201), resp.get_json()
    return resp.get_json()
