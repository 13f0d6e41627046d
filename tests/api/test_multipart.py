"""service.multipart (large uploads cut with bytes.find) against werkzeug's parser: the same
fields and files, or it declines and werkzeug decides."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from werkzeug.formparser import FormDataParser

import service.evaluation_request as evaluation_request
from service import multipart

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"

B = "xYz-boundary"


def werkzeug_parse(raw: bytes, boundary: str = B):
    _, form, files = FormDataParser().parse(io.BytesIO(raw), "multipart/form-data", len(raw),
                                            {"boundary": boundary})
    out = {k: [f.read() for f in files.getlist(k)] for k in files}
    for f in files.values():
        f.close()
    return {k: form.getlist(k) for k in form}, out


def part(name: str, content: bytes, filename: str | None = None, extra: str = "") -> bytes:
    disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
    return (f"--{B}\r\nContent-Disposition: {disposition}\r\n{extra}\r\n").encode() + \
        content + b"\r\n"


END = f"--{B}--\r\n".encode()
BODIES = {
    "files and fields": part("run", b"q1 Q0 d1 1 2.5 r\n", "run.txt") +
    part("qrels", b"q1 0 d1 1\n", "q.txt", "Content-Type: text/plain\r\n") +
    part("measures", b"map") + part("measures", b"P.5") + END,
    "preamble and epilogue": b"ignored preamble\r\n" + part("a", b"1") + END + b"epilogue",
    "content that looks like a delimiter": part("run", f"x\r\n--{B}x\r\n--{B[:-1]}".encode(),
                                                 "r.txt") + END,
    "unicode field and empty file": part("name", "héllo ✓".encode()) +
    part("run", b"", "empty.txt") + END,
    "binary file with CRLFs": part("run", bytes(range(256)) * 3 + b"\r\n\r\n", "b.bin") + END,
    "RFC 5987 filename (declined)": (f"--{B}\r\nContent-Disposition: form-data; name=\"run\"; "
                                     f"filename*=UTF-8''r%C3%A9.txt\r\n\r\n").encode() +
    b"abc\r\n" + END,
    "LF line endings (declined)": part("a", b"1").replace(b"\r\n", b"\n") + END,
    "no closing delimiter (declined)": part("a", b"1"),
    "not a form-data part (declined)": (f"--{B}\r\nContent-Disposition: attachment; "
                                        f"name=\"a\"\r\n\r\n1\r\n").encode() + END,
}


@pytest.mark.parametrize("name", list(BODIES))
def test_fast_parser_agrees_with_werkzeug_or_declines(name):
    raw = BODIES[name]
    fast = multipart.parse(raw, B, None)
    if "(declined)" in name:
        assert fast is None
        return
    assert fast is not None
    form, files = fast
    assert ({k: form.getlist(k) for k in form},
            {k: files.getlist(k) for k in files}) == werkzeug_parse(raw)


def test_large_uploads_take_the_fast_parser_and_answer_the_same(client, monkeypatch):
    def post():
        data = {"run": (io.BytesIO((DATA / "results.test").read_bytes()), "run.txt"),
                "qrels": (io.BytesIO((DATA / "qrels.test").read_bytes()), "qrels.txt"),
                "measures": "map,P.5", "complete_topics": "true"}
        return client.post("/v1/evaluations", data=data, content_type="multipart/form-data")

    slow = post().get_json()
    used = []
    real = multipart.parse
    monkeypatch.setattr(evaluation_request, "FAST_MULTIPART_MIN_BYTES", 0)
    monkeypatch.setattr(multipart, "parse", lambda *a: used.append(real(*a)) or used[-1])
    fast = post()
    assert fast.status_code == 200 and used and used[-1] is not None
    assert fast.get_json() == slow
    assert round(slow["aggregate"]["map"], 4) == 0.1785


def test_an_oversized_form_field_is_413_by_either_parser(app, client, monkeypatch):
    app.config["MAX_FORM_MEMORY_SIZE"] = 1000
    body = {"run": "q1 Q0 d1 1 1 r\n" * 200, "qrels": "q1 0 d1 1\n"}
    for threshold in (1 << 40, 0):
        monkeypatch.setattr(evaluation_request, "FAST_MULTIPART_MIN_BYTES", threshold)
        resp = client.post("/v1/evaluations", data=body, content_type="multipart/form-data")
        assert resp.status_code == 413, threshold
        assert resp.mimetype == "application/problem+json"
