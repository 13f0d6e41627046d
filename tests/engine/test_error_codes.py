"""Engine errors carry stable codes, and one mapping (cranfield.errors.error_report) turns
them into what every interface reports: the problem document's status/title/errors, and the
CLI's exit code. Nothing matches on a message's text."""

from __future__ import annotations

import pytest

import cranfield
from cranfield.cli import main
from cranfield.errors import ERROR_CODES, CranfieldError, error_report

RUN = "q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\n"
QRELS = "q1 0 d1 1\n"


def _error(run: str, qrels: str, measures=("map",)) -> CranfieldError:
    with pytest.raises(CranfieldError) as info:
        cranfield.evaluate(cranfield.read_qrels(qrels.encode(), name="qrels"),
                           cranfield.read_run(run.encode(), name="run"), list(measures))
    return info.value


@pytest.mark.parametrize("run, qrels, measures, code, field, exit_code", [
    (RUN, "q9 0 d1 1\n", ("map",), "no-overlap", "run", 7),
    (RUN, QRELS, ("nosuch",), "unknown-measure", "measures", 1),
    ("", QRELS, ("map",), "empty-input", "run", 2),
    (RUN, "", ("map",), "empty-input", "qrels", 2),
])
def test_evaluation_errors_carry_their_code(run, qrels, measures, code, field, exit_code):
    exc = _error(run, qrels, measures)
    report = error_report(exc)
    assert exc.code == code == report.code
    assert report.status == 422 and report.exit_code == exit_code
    assert list(report.errors) == [field]
    assert report.detail == str(exc)


@pytest.mark.parametrize("text, code", [
    ("q1 Q0 d1 1 2.0 r\nq1 Q0 d1 2 1.0 r\n", "duplicate-docid"),
    ("q1 Q0 d1 1 x r\n", "invalid-input"),
])
def test_input_errors_carry_their_code(text, code):
    with pytest.raises(cranfield.InputError) as info:
        cranfield.read_run(text.encode(), name="run")
    report = error_report(info.value)
    assert info.value.code == code == report.code
    assert report.title == "Invalid input"
    assert report.errors == {info.value.location: [info.value.reason]}
    assert report.exit_code == ERROR_CODES[code][2]


def test_a_judgment_twice_is_its_own_code():
    with pytest.raises(cranfield.InputError) as info:
        cranfield.read_qrels(b"q1 0 d1 1\nq1 0 d1 0\n", name="qrels")
    assert info.value.code == "duplicate-judgment"
    assert error_report(info.value).exit_code == 4


def test_the_code_not_the_message_decides_the_exit_code():
    """A message that happens to say "twice" or "no topic" changes nothing."""
    plain = cranfield.EvaluationError("no topic twice")
    assert error_report(plain).exit_code == 1 and error_report(plain).code == "cannot-evaluate"
    coded = cranfield.EvaluationError("anything", code="no-overlap")
    assert error_report(coded).exit_code == 7


def test_a_measure_error_can_be_reported_under_another_field():
    exc = cranfield.MeasureError("nosuch", "unknown measure")
    assert list(error_report(exc, "gate.measure").errors) == ["gate.measure"]


@pytest.mark.parametrize("run, qrels, code", [
    (RUN, "q9 0 d1 1\n", 7),
    ("q1 Q0 d1 1 2.0 r\nq1 Q0 d1 2 1.0 r\n", QRELS, 4),
    ("", QRELS, 2),
])
def test_cli_exit_codes_follow_the_codes(tmp_path, capsys, run, qrels, code):
    (tmp_path / "run").write_text(run)
    (tmp_path / "qrels").write_text(qrels)
    assert main(["eval", str(tmp_path / "qrels"), str(tmp_path / "run")]) == code
    assert capsys.readouterr().err.startswith("cranfield: ")


def test_an_upload_past_a_bound_is_413_wherever_it_is_found():
    """A Parquet run over the row bound: 413 as the API reports it before storing, and the
    same status in a queued job's problem when only the worker's full read finds it."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from cranfield.inputs.columnar import read_run_bytes

    buf = io.BytesIO()
    pq.write_table(pa.table({"topic": ["q"] * 5, "docid": list("abcde"),
                             "score": [1.0] * 5}), buf)
    with pytest.raises(cranfield.InputError) as info:
        read_run_bytes(buf.getvalue(), max_rows=4)
    report = error_report(info.value)
    assert (report.code, report.status, report.title) == (
        "too-large", 413, "Request Entity Too Large")
    assert report.problem()["status"] == 413
