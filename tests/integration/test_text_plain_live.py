"""``Accept: text/plain`` against a real gunicorn is ``cranfield eval``'s output (issue #26):
a JSON body with TREC text, a multipart upload built by hand (as curl sends it) and a queued
job fetched as text/plain answer the bytes the ``cranfield eval`` command prints for the same
files; per_topic not given is the summary (no ``-q``), measures named as trec_eval prints
them. The many-ways, many-options differential runs on the Flask test client
(tests/api/test_text_plain_differential.py); this is the same answer over HTTP."""

from __future__ import annotations

import subprocess
import urllib.request
import uuid

import orjson
import pytest
from servers import CRANFIELD, DATA, ROOT, wait_job

MEASURES = ["nDCG@10", "P.5", "map", "recip_rank", "ERR@20", "AP"]


def cranfield_eval(*flags: str) -> bytes:
    argv = [CRANFIELD, "eval", *flags, *[a for m in MEASURES for a in ("-m", m)],
            str(DATA / "qrels.rel_level"), str(DATA / "results.test")]
    done = subprocess.run(argv, capture_output=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def send(url: str, data: bytes | None, headers: dict, method: str = "POST"
         ) -> tuple[int, dict, bytes]:
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=60) as resp:
        return resp.status, dict(resp.headers), resp.read()


def multipart(fields: dict[str, str], files: dict[str, bytes]) -> tuple[bytes, str]:
    """A multipart/form-data body as curl -F builds it."""
    boundary = uuid.uuid4().hex
    out = []
    for name, value in fields.items():
        out.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                   f"{value}\r\n".encode())
    for name, data in files.items():
        out.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
                   f'filename="{name}.txt"\r\nContent-Type: text/plain\r\n\r\n'.encode()
                   + data + b"\r\n")
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


def queued_text(base: str, data: bytes, content_type: str) -> bytes:
    status, headers, _ = send(base + "/v1/evaluations", data,
                              {"Content-Type": content_type, "Accept": "text/plain",
                               "Prefer": "respond-async"})
    assert status == 202
    job = wait_job(base, headers["Location"])
    assert job["status"] == "finished", job
    location = base + headers["Location"]
    status, headers, body = send(location, None, {"Accept": "text/plain"}, "GET")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    return body


@pytest.mark.parametrize("per_topic", [None, True])
def test_text_plain_over_http_is_cranfield_eval_s_output(live_server, per_topic):
    run, qrels = (DATA / "results.test").read_bytes(), (DATA / "qrels.rel_level").read_bytes()
    expected = cranfield_eval("-l", "2", *(["-q"] if per_topic else []))
    json_body = orjson.dumps({"run": run.decode(), "qrels": qrels.decode(),
                              "measures": MEASURES, "options": {"relevance_level": 2},
                              **({"per_topic": True} if per_topic else {})})
    form, form_type = multipart({"measures": ",".join(MEASURES), "relevance_level": "2",
                                 **({"per_topic": "true"} if per_topic else {})},
                                {"run": run, "qrels": qrels})
    answers = {}
    for way, data, content_type in (("json", json_body, "application/json"),
                                    ("multipart", form, form_type)):
        status, headers, body = send(live_server + "/v1/evaluations", data,
                                     {"Content-Type": content_type, "Accept": "text/plain"})
        assert status == 200 and headers["Content-Type"].startswith("text/plain")
        answers[way] = body
        answers[f"queued {way}"] = queued_text(live_server, data, content_type)
    for way, body in answers.items():
        assert body == expected, f"{way}:\n{body.decode()}"
    names = [line.split(b"\t")[0].rstrip() for line in expected.splitlines()]
    assert list(dict.fromkeys(names)) == [b"map", b"recip_rank", b"P_5", b"ndcg_cut_10",
                                          b"ERR@20"]
    assert len(names) == 5 * (4 if per_topic else 1)
    assert expected.splitlines()[-5] == b"map                   \tall\t0.1667"  # out.test.aql
