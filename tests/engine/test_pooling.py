"""cranfield.compare.pooling: the union of each run's top-k per topic, in trec_eval's ranking order.

Worked example, depth 2:

    run one, topic 1: a 3.0, b 2.0, c 2.0, d 1.0   -> top 2: a, then the 2.0 tie broken by
                                                      docno descending: c before b -> {a, c}
    run one, topic 2: x 5                          -> shorter than the depth: {x}
    run two, topic 1: e 9, a 8                     -> {e, a}
    run two, topic 2: y 5, z 5                     -> {z, y}

    pool: topic 1 {a, c, e}, topic 2 {x, y, z}; a is shared, so one contributes c and x
    uniquely, two contributes e, y and z.
"""

from __future__ import annotations

import pytest

from cranfield.compare.pooling import format_pool, pool
from cranfield.errors import InputError

ONE = "1 Q0 a 1 3.0 one\n1 Q0 b 2 2.0 one\n1 Q0 c 3 2.0 one\n1 Q0 d 4 1.0 one\n2 Q0 x 1 5 one\n"
TWO = "1 Q0 e 1 9 two\n1 Q0 a 2 8 two\n2 Q0 y 1 5 two\n2 Q0 z 2 5 two\n"


def test_hand_worked_pool_with_a_tie_at_the_depth():
    p = pool({"one": ONE, "two": TWO}, 2)
    assert p["topics"] == {"1": ["a", "c", "e"], "2": ["x", "y", "z"]}
    assert p["sizes"] == {"1": 3, "2": 3} and p["total"] == 6
    assert p["contributed"] == {"one": 2, "two": 3}
    assert p["already_judged"] == 0 and p["depth"] == 2 and p["runs"] == ["one", "two"]
    # depth 3 reaches b (the tie's other half); at depth 1 two's y/z tie goes to z
    assert pool({"one": ONE, "two": TWO}, 3)["topics"]["1"] == ["a", "b", "c", "e"]
    assert pool({"one": ONE, "two": TWO}, 1)["topics"] == {"1": ["a", "e"], "2": ["x", "z"]}


def test_judged_documents_are_removed():
    judged = {"1": {"a": 1, "c": 0, "e": -1}, "2": {"q": 2}, "9": {"x": 1}}
    p = pool({"one": ONE, "two": TWO}, 2, judged=judged)
    # a and c are judged (any grade ≥ 0); e is "pooled, not judged" (negative): still pooled;
    # x is judged for topic 9 only
    assert p["topics"] == {"1": ["e"], "2": ["x", "y", "z"]}
    assert p["already_judged"] == 2 and p["total"] == 4
    assert p["contributed"] == {"one": 1, "two": 3}
    text = "1 0 a 1\n1 0 c 0\n2 0 y 1\n2 0 z 0\n2 0 x 0\n"
    everything = pool({"one": ONE, "two": TWO}, 2, judged=text)
    assert everything["topics"] == {"1": ["e"], "2": []} and everything["sizes"]["2"] == 0
    assert everything["already_judged"] == 5


def test_depth_beyond_the_runs_pools_everything():
    p = pool({"one": ONE, "two": TWO}, 1000)
    assert p["topics"] == {"1": ["a", "b", "c", "d", "e"], "2": ["x", "y", "z"]}
    assert p["contributed"] == {"one": 4, "two": 3}


def test_unique_contributions_count_each_run_alone():
    three = "1 Q0 c 1 1 three\n2 Q0 w 1 1 three\n"
    p = pool({"one": ONE, "two": TWO, "three": three}, 2)
    # c is now shared by one and three; w is three's alone
    assert p["contributed"] == {"one": 1, "two": 3, "three": 1}
    assert p["topics"]["2"] == ["w", "x", "y", "z"]


def test_float32_ties_follow_the_profile():
    # a scores higher as a double, but as float32 (trec_eval 9.0.8) the two tie and docno
    # descending puts b first
    run = {"1": {"b": 1.0, "a": 1.0 + 1e-12, "c": 0.5}}
    assert pool([run], 1)["topics"]["1"] == ["b"]
    assert pool([run], 1, float32_scores=False)["topics"]["1"] == ["a"]


def test_list_input_names_runs_by_runid():
    p = pool([ONE, TWO, TWO], 1)
    assert p["runs"] == ["one", "two", "two#2"]
    assert p["contributed"] == {"one": 2, "two": 0, "two#2": 0}


def test_format_pool_is_a_judging_file():
    p = pool({"one": ONE, "two": TWO}, 2)
    assert format_pool(p) == "1 0 a\n1 0 c\n1 0 e\n2 0 x\n2 0 y\n2 0 z\n"
    # topics and docids in byte order, whatever order the dict has
    assert format_pool({"topics": {"b": ["z", "B"], "a": ["x"]}}) == "a 0 x\nb 0 B\nb 0 z\n"


@pytest.mark.parametrize("depth", [0, -1, 2.5, True])
def test_bad_depth(depth):
    with pytest.raises(InputError, match="depth"):
        pool({"one": ONE}, depth)


def test_no_runs():
    with pytest.raises(InputError, match="no run"):
        pool({}, 5)
