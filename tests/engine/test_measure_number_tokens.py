"""Numbers in measure names are ASCII, whole token (issue #27): trec_eval reads cutoffs with C's
atol (``ndcg_cut.1e3`` is @1, ``P.10abc`` @10) and Python's int()/float() take fullwidth digits,
underscores, '+' and spaces; each was one input read silently as another. Every parameter
position of every measure family refuses them with a MeasureError naming the measure and the
token; the valid spelling at the same position is unchanged."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cranfield
from cranfield import MeasureError
from cranfield.measures.name_params import ascii_float, ascii_int
from cranfield.measures.names import resolve

PROFILE = "trec_eval-10"

# (template with {} at one parameter position, a valid token there, integer position?)
POSITIONS = [
    ("P.{}", "5", True), ("P.5,{}", "10", True), ("P_{}", "5", True),
    ("ndcg_cut.{}", "10", True), ("map_cut.{}", "10", True), ("success.{}", "5", True),
    ("recall.{}", "20", True), ("relstring.{}", "10", True), ("ndcg.{}=3", "1", True),
    ("P@{}", "5", True), ("nDCG@{}", "10", True), ("AP@{}", "100", True),
    ("ERR@{}", "20", True), ("P(rel={})@5", "2", True), ("ndcg@{}", "10", True),
    ("mrr@{}", "10", True), ("nDCG(gain=exp)@{}", "10", True),
    ("iprec_at_recall.{}", "0.5", False), ("IPrec@{}", "0.5", False),
    ("set_F.{}", "0.5", False), ("utility.1,-1,0,{}", "0", False),
    ("utility.{},-1,0,0", "1", False), ("rbp.p={}", "0.8", False), ("ndcg.1={}", "3", False),
    ("Rprec_mult.{}", "0.5", False), ("RBP(p={})", "0.8", False),
    ("SetF(beta={})", "0.5", False), ("11pt_avg.{}", "0.5", False),
]

# the seen misreads and their class: fullwidth digits, underscores, exponents (integers),
# trailing junk, signs, spaces
BAD_INT = ["1e3", "10abc", "1_0", "５", "１０", "+5", " 5", "5 ", "5\t", "1.5", "0x10", "٥",
           "5.", "", "1e0"]
BAD_FLOAT = ["０.5", "0_5", "0.5abc", "+0.5", " 0.5", "0.5 ", "0.5.1", "٠.5", "", "0x1p-1",
             "1__0", "infinit"]


def readable(token):
    try:
        ascii_float(token)
    except ValueError:
        return False
    return True


def keys(name):
    return [i.key for i in resolve([name], PROFILE)]


@pytest.mark.parametrize("template, good, integer", POSITIONS)
def test_valid_token_at_each_position_is_read(template, good, integer):
    assert keys(template.format(good))


@pytest.mark.parametrize("template, good, integer", POSITIONS)
def test_bad_tokens_at_each_position_are_refused_naming_the_token(template, good, integer):
    for bad in BAD_INT if integer else BAD_FLOAT:
        name = template.format(bad)
        if name != name.strip() or ("(" in template and bad != bad.strip()
                                    and readable(bad.strip())):
            continue  # outer spaces of a name, or beside '=' in parentheses, are separators
        with pytest.raises(MeasureError) as info:
            if template.startswith("P(rel=") and readable(bad):
                # rel= is a threshold on real gains when it is a decimal number (issue #31):
                # the name resolves, and an evaluation of integer grades refuses it
                resolve([name], PROFILE)
                cranfield.evaluate({"q": {"d": 1}}, {"q": {"d": 1.0}}, [name], profile=PROFILE)
            else:
                resolve([name], PROFILE)
        assert info.value.name == name.strip(), name
        if bad.strip():
            assert repr(bad) in str(info.value) or bad.strip() in str(info.value), \
                (name, str(info.value))


@pytest.mark.parametrize("name, token", [
    ("ndcg_cut.1e3", "'1e3'"), ("P.10abc", "'10abc'"), ("P.1_0", "'1_0'"), ("P.５", "'５'"),
    ("P@1_0", "'1_0'"), ("nDCG@１", "'１'"), ("P@+5", "'+5'"), ("ndcg_cut.10,20,23.4", "'23.4'"),
])
def test_seen_misreads_are_refused(name, token):
    # issue #27, "Silent misreads" 4: trec_eval's atol read each of these as another cutoff
    with pytest.raises(MeasureError) as info:
        resolve([name], PROFILE)
    assert info.value.name == name
    assert token in str(info.value)
    assert "ASCII" in str(info.value)


def test_valid_spellings_are_unchanged():
    assert keys("P.5,10") == ["P_5", "P_10"]
    assert keys("ndcg_cut.10,20,23") == ["ndcg_cut_10", "ndcg_cut_20", "ndcg_cut_23"]
    assert keys("set_F.0.5") == ["set_F_0.5"]
    assert keys("utility.1,-1,0,0") == ["utility_1,-1,0,0"]
    assert keys("rbp.p=0.8") == ["rbp_p=0.8"]
    assert keys("iprec_at_recall..10,.20") == ["iprec_at_recall_0.10", "iprec_at_recall_0.20"]
    assert [i.value for i in resolve(["P@1000"], PROFILE)] == [1000]
    assert [i.value for i in resolve(["IPrec@.25"], PROFILE)] == [0.25]


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=6))
def test_ascii_int_takes_exactly_ascii_decimal(text):
    ascii_digits = text.lstrip("-") and all(c in "0123456789" for c in text.lstrip("-")) \
        and text.count("-") <= 1 and (text[0] == "-" or "-" not in text)
    if ascii_digits:
        assert ascii_int(text) == int(text)
    else:
        with pytest.raises(ValueError):
            ascii_int(text)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=10**6),
       st.sampled_from(["１", "_", "e0", "abc", "+", " ", ".", "٣", "\u00a0"]),
       st.sampled_from(["P.{}", "ndcg_cut.{}", "P@{}", "nDCG@{}", "success.{}", "map_cut.{}"]),
       st.booleans())
def test_any_cutoff_with_non_ascii_or_junk_is_refused(k, junk, template, before):
    token = f"{junk}{k}" if before else f"{k}{junk}"
    name = template.format(token)
    if name != name.strip():
        return
    with pytest.raises(MeasureError):
        resolve([name], PROFILE)
    # and the clean cutoff is read as itself
    assert [i.value for i in resolve([template.format(k)], PROFILE)] == [k]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789.eE+-_ １inf", min_size=1, max_size=8))
def test_ascii_float_agrees_with_float_on_what_it_takes(text):
    try:
        value = ascii_float(text)
    except ValueError:
        return
    assert value == float(text) or value != value  # nan
    assert text.isascii() and "_" not in text and " " not in text and text[0] != "+"
