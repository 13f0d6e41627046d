"""``cranfield eval --server URL --record …``: the record argument's grammar, and that a
record needs a service (the service's side: tests/api/test_results_api.py and
tests/integration/test_results_cli.py)."""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from cranfield.cli import _record_arg, main

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"


@pytest.mark.parametrize("text, record", [
    ("system=bm25,label=nightly-1", {"system": "bm25", "label": "nightly-1"}),
    ("label=n, system=bm25 ,commit=abc123", {"label": "n", "system": "bm25",
                                             "commit": "abc123"}),
    ("system=s,label=l,tags=prod;night ; x", {"system": "s", "label": "l",
                                              "tags": ["prod", "night", "x"]}),
])
def test_record_argument(text, record):
    assert _record_arg(text) == record


@pytest.mark.parametrize("text, message", [
    ("system=s", "needs label"),
    ("label=l", "needs system"),
    ("", "give KEY=VALUE pairs"),
    ("system=s,label=l,owner=me", "'owner=me': give KEY=VALUE pairs, KEY one of system, label, "
                                  "commit, tags"),
    ("system=s,label=", "give KEY=VALUE pairs"),
    ("system=s,system=t,label=l", "system given twice"),
])
def test_bad_record_arguments_say_why(text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message.replace("(", r"\(")):
        _record_arg(text)


def test_record_needs_a_server(capsys):
    code = main(["eval", "--record", "system=s,label=l", str(DATA / "qrels.test"),
                 str(DATA / "results.test")])
    assert code == 2
    assert capsys.readouterr().err == ("cranfield: --record needs --server (results are kept "
                                       "by the service)\n")


def test_history_cannot_reach_a_service(capsys):
    code = main(["history", "bm25", "--server", "http://127.0.0.1:9"])
    assert code == 2
    assert capsys.readouterr().err.startswith("cranfield: cannot reach http://127.0.0.1:9")


class _Recorder(BaseHTTPRequestHandler):
    """A stand-in service: keeps each request's headers and body, answers as a recording
    evaluation would (JSON for application/json, else trec_eval's text)."""
    seen: list = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).seen.append((self.path, dict(self.headers), body))
        if self.headers["Accept"] == "application/json":
            out = json.dumps({"aggregate": {"map": 0.5}, "recorded": {
                "id": "0" * 32, "system": "bm25", "label": "n1"}}).encode()
            mimetype = "application/json"
        else:
            out, mimetype = b"map                   \tall\t0.5000\n", "text/plain"
        self.send_response(200)
        if mimetype == "text/plain":  # a text answer names the recorded result in a header
            self.send_header("Cranfield-Result-Id", "0" * 32)
        self.send_header("Content-Type", mimetype)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


@pytest.fixture
def stand_in():
    _Recorder.seen = []
    server = HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", _Recorder.seen
    server.shutdown()
    thread.join()
    server.server_close()


def form_parts(content_type: str, raw: bytes) -> dict[str, list[bytes]]:
    """A multipart/form-data body's parts by name, read by the standard library's MIME
    parser (not the service's)."""
    from email import message_from_bytes

    message = message_from_bytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    parts: dict[str, list[bytes]] = {}
    for part in message.get_payload():
        name = part.get_param("name", header="content-disposition")
        parts.setdefault(name, []).append(part.get_payload(decode=True))
    return parts


@pytest.mark.parametrize("fmt", ["json", "trec"])
def test_record_goes_along_with_the_files(stand_in, capsys, fmt):
    """The client sends the run and qrels files as the file parts of one multipart body
    (streamed from disk, with an exact Content-Length), ``record`` as a JSON form field, and
    says the recorded result's id on standard error in every format."""
    url, seen = stand_in
    code = main(["eval", "--server", url, "--format", fmt, "-m", "map",
                 "--record", "system=bm25,label=n1,commit=abc,tags=ci;main",
                 str(DATA / "qrels.test"), str(DATA / "results.test")])
    assert code == 0
    [(path, headers, raw)] = seen  # one request: the run is sent once
    assert path == "/v1/evaluations"
    assert headers["Content-Type"].startswith("multipart/form-data; boundary=")
    assert int(headers["Content-Length"]) == len(raw)
    parts = form_parts(headers["Content-Type"], raw)
    assert json.loads(parts["record"][0]) == {"system": "bm25", "label": "n1",
                                              "commit": "abc", "tags": ["ci", "main"]}
    assert parts["run"] == [(DATA / "results.test").read_bytes()]
    assert parts["qrels"] == [(DATA / "qrels.test").read_bytes()]
    assert parts["measures"] == [b"map"]
    err = capsys.readouterr().err
    assert f"cranfield: recorded as {'0' * 32} (bm25, n1)" in err
