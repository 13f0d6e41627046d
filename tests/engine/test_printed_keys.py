"""Every key a result is recorded under reads back as its measure (issue #25's 'names
everywhere'): trec_eval prints a parameterised measure as ``name_params`` (``set_F_0.5``,
``utility_1,-1,0,0``, ``ndcg_rel_0=0,1=1``); asked by that key, a trend, a results filter or a
comparison of recorded results must find the same measure, with the same values, not call it
unknown."""

from __future__ import annotations

from pathlib import Path

import pytest

import cranfield
from cranfield.errors import MeasureError
from cranfield.measures.names import parse_measure, recorded_keys

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
ASKED = ["all_trec", "set_F.0.5", "utility.1,-1,0,0", "11pt_avg.0.2,0.4", "ndcg.0=0,1=1,2=3",
         "ndcg_rel.0=0,1=1", "rbp.p=0.8", "relstring.5", "G.0=0,1=1", "dcg.0=0,1=2",
         "Rprec_mult.0.3", "P.5,10", "nDCG@10"]


@pytest.fixture(scope="module")
def inputs():
    return (cranfield.read_run((DATA / "results.test").read_bytes(), name="run"),
            cranfield.read_qrels((DATA / "qrels.test").read_bytes(), name="qrels"))


@pytest.mark.parametrize("asked", ASKED)
def test_each_printed_key_reads_back_as_its_measure(inputs, asked):
    run, qrels = inputs
    ev = cranfield.evaluate(qrels, run, [asked])
    keys = [i.key for i in ev.instances]
    for key in keys:
        assert [i.key for i in parse_measure(key)] == [key]
        again = cranfield.evaluate(qrels, run, [key])
        value, first = again.aggregate.get(key), ev.aggregate.get(key)  # none: relstring
        assert value == first or (value != value and first != first)  # NaN both
        assert recorded_keys(key, keys)[0] == key
    if len(keys) == 1:
        assert recorded_keys(asked, keys) == keys  # as it was asked when recorded


@pytest.mark.parametrize("name", ["set_F_x", "set_F_", "ndcg_1", "P_x", "map_5", "foo_1"])
def test_a_printed_form_with_bad_parameters_is_still_refused(name):
    with pytest.raises(MeasureError):
        parse_measure(name)
