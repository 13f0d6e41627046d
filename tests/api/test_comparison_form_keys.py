"""Issue #27, one input, one answer: a comparison's ``baseline`` and ``gate`` form fields are
JSON text, read by the reader the JSON body is read by, so an object holding a key twice is
the same 422 naming the key's path (``baseline.system``, ``gate.measure``,
``gate[1].max_drop``) in a multipart form and in a JSON body; it was read last-wins in the
form. Every response checked against openapi.yaml."""

from __future__ import annotations

import pytest

RUN_A = "q1 Q0 d1 1 2.0 a\nq1 Q0 d2 2 1.0 a\nq2 Q0 d3 1 1.0 a\n"
RUN_B = "q1 Q0 d2 1 2.0 b\nq1 Q0 d1 2 1.0 b\nq2 Q0 d3 1 1.0 b\n"
QRELS = "q1 0 d1 1\nq2 0 d3 1\n"
TWICE = ("is given twice in one JSON object (a JSON reader keeps only one of them, silently): "
         "give it once")


def _form(**fields) -> dict:
    return {"runs": [RUN_A, RUN_B], "qrels": QRELS, "measures": "map", "permutations": "100",
            "bootstrap_samples": "100", **fields}


def _json(**members) -> bytes:
    """A JSON body whose members are given as JSON text (so that a key can be repeated)."""
    import orjson

    head = orjson.dumps({"runs": [{"run": RUN_A}, {"run": RUN_B}], "qrels": QRELS,
                         "measures": ["map"], "permutations": 100,
                         "bootstrap_samples": 100})[:-1]
    return head + b"".join(b', "%s": %s' % (k.encode(), v.encode())
                           for k, v in members.items()) + b"}"


def _errors(resp) -> dict:
    assert resp.status_code == 422, resp.get_data(as_text=True)[:500]
    assert resp.mimetype == "application/problem+json"
    return resp.get_json()["errors"]


@pytest.mark.parametrize(("field", "text", "path"), [
    ("baseline", '{"system": "a", "system": "b"}', "baseline.system"),
    ("gate", '{"measure": "map", "max_drop": 0.01, "measure": "P_5"}', "gate.measure"),
])
def test_a_key_twice_in_a_json_form_field_is_the_json_bodys_422(client, field, text, path):
    expected = {path: [f"'{path.rsplit('.', 1)[1]}' {TWICE}"]}
    as_form = client.post("/v1/comparisons", data=_form(**{field: text}),
                          content_type="multipart/form-data")
    as_json = client.post("/v1/comparisons", data=_json(**{field: text}),
                          headers={"Content-Type": "application/json"})
    assert _errors(as_form) == _errors(as_json) == expected


def test_a_key_twice_in_the_second_of_two_gate_fields_is_named_by_its_index(client):
    gates = ["map:0.5", '{"measure": "map", "max_drop": 0.01, "max_drop": 0.5}']
    expected = {"gate[1].max_drop": [f"'max_drop' {TWICE}"]}
    as_form = client.post("/v1/comparisons", data=_form(gate=gates),
                          content_type="multipart/form-data")
    as_json = client.post("/v1/comparisons", data=_json(gate=f'["map:0.5", {gates[1]}]'),
                          headers={"Content-Type": "application/json"})
    assert _errors(as_form) == _errors(as_json) == expected


def test_json_form_fields_given_once_are_read_as_before(client):
    # the same gate as an object and as the CLI's text: one verdict, on the same figures
    obj = client.post("/v1/comparisons", data=_form(
        gate='{"measure": "map", "max_drop": 0.5}', baseline="run1"),
        content_type="multipart/form-data")
    text = client.post("/v1/comparisons", data=_form(gate="map:0.5", baseline="run1"),
                       content_type="multipart/form-data")
    assert obj.status_code == text.status_code == 200, obj.get_data(as_text=True)[:300]
    assert obj.get_json()["gate"] == text.get_json()["gate"]
    assert obj.get_json()["gate"]["checks"][0]["measure"] == "map"
    # a baseline that is not a JSON object is a run's name, as before
    resp = client.post("/v1/comparisons", data=_form(baseline="{not json"),
                       content_type="multipart/form-data")
    assert _errors(resp) == {"baseline": ["'{not json' is not one of the runs (run1, run2)"]}
