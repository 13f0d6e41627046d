"""qrels_jg with a relevance level below 0 (-l -1, -l -3; review R1 F8), as both trec_eval
binaries print it: form_res_rels_jg.c reads a retrieved doc the group did not judge as -1
(RELVALUE_NONPOOL), a judged negative rel as -2 (RELVALUE_UNJUDGED), counts num_rel and
num_rel_ret over grades >= 0 only; m_Rprec_mult_avgjg.c counts down from num_rel_ret and
stops at 0; map over num_rel = 0 is C's inf, printed "   inf".

Expected values: the stdout of /work/te/v9.0.8/trec_eval and /work/te/v10.0/trec_eval (the
same for every case), `trec_eval -R qrels_jg [-J] -l L -m map_avgjg -m P_avgjg.1,2
-m Rprec_mult_avgjg.0.5,1 QRELS RUN` with the QRELS and RUN below (run 2026-11-27)."""

from __future__ import annotations

import pytest

from cranfield.cli import main

RUN = "q1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 2.0 r\nq1 Q0 d3 3 1.0 r\n"
NEG1 = "q1 g d1 1\nq1 g d3 -1\nq1 h d2 1\n"  # the reviewer's
NEG2 = "q1 g d1 -1\nq1 h d2 1\nq1 h d4 0\n"  # group g judges no grade >= 0: num_rel 0
KEYS = ["map_avgjg", "P_avgjg_1", "P_avgjg_2", "Rprec_mult_avgjg_0.50",
        "Rprec_mult_avgjg_1.00"]

CASES = [  # (qrels, -l, -J, the binaries' values in KEYS order)
    (NEG1, -1, False, ["2.5000", "1.0000", "1.0000", "0.0000", "0.0000"]),
    (NEG1, -1, True, ["1.0000", "1.0000", "0.5000", "1.0000", "1.0000"]),
    (NEG1, -3, False, ["3.0000", "1.0000", "1.0000", "0.0000", "0.0000"]),
    (NEG1, -3, True, ["1.0000", "1.0000", "0.5000", "1.0000", "1.0000"]),
    (NEG2, -1, False, ["   inf", "0.5000", "0.7500", "0.0000", "0.0000"]),
    (NEG2, -1, True, ["0.2500", "0.5000", "0.2500", "0.5000", "0.2500"]),
    (NEG2, -3, False, ["   inf", "1.0000", "1.0000", "0.0000", "0.0000"]),
    (NEG2, -3, True, ["0.2500", "0.5000", "0.2500", "0.5000", "0.2500"]),
]


@pytest.mark.parametrize("profile", ["trec_eval-9.0.8", "trec_eval-10"])
@pytest.mark.parametrize("qrels, level, judged_only, values", CASES)
def test_negative_levels_print_what_trec_eval_prints(tmp_path, capsys, profile, qrels,
                                                      level, judged_only, values):
    (tmp_path / "q").write_text(qrels)
    (tmp_path / "r").write_text(RUN)
    args = ["eval", "--profile", profile, "-R", "qrels_jg", "-l", str(level),
            *(["-J"] if judged_only else []), "-m", "map_avgjg", "-m", "P_avgjg.1,2",
            "-m", "Rprec_mult_avgjg.0.5,1", str(tmp_path / "q"), str(tmp_path / "r")]
    assert main(args) == 0
    expected = "".join(f"{k:<22}\tall\t{v}\n" for k, v in zip(KEYS, values, strict=True))
    assert capsys.readouterr().out == expected
