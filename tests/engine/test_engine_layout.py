"""The engine's own tidiness (issue #17), checked so it stays: one profile record asked for
its flags (no profile-name comparisons), configuration read from the environment in one
place, no private helper imported across modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cranfield
from cranfield.inputs import io, json_body
from cranfield.measures import (
    DEFAULT_PROFILE,
    PROFILES,
    REAL_GAINS_PROFILE,
    Profile,
    resolve_profile,
)
from cranfield.settings import SETTINGS, Settings

ENGINE = Path(cranfield.__file__).resolve().parent
SOURCES = sorted(ENGINE.rglob("*.py"))


def trees():
    for path in SOURCES:
        yield path.relative_to(ENGINE.parent), ast.parse(path.read_text(), str(path))


# ---- profiles ----------------------------------------------------------------------------------

def test_profiles_are_records_by_name_default_first():
    assert list(PROFILES) == ["trec_eval-9.0.8", "trec_eval-10", "cranfield"]
    assert next(iter(PROFILES)) == DEFAULT_PROFILE
    assert all(isinstance(p, Profile) and p.name == n for n, p in PROFILES.items())
    nine, ten = PROFILES["trec_eval-9.0.8"], PROFILES["trec_eval-10"]
    assert nine.float32_scores and not ten.float32_scores
    assert ten.rounded_recall_cutoffs and not nine.rounded_recall_cutoffs
    assert ten.prints_topics_missing_from_run and not nine.prints_topics_missing_from_run
    assert ten.keeps_missing_topic_values and not nine.keeps_missing_topic_values
    assert ten.all_trec_has_10_measures and not nine.all_trec_has_10_measures
    # cranfield's: trec_eval 10's arithmetic and output, and real gains, which neither
    # trec_eval profile reads (issue #31)
    own = PROFILES["cranfield"]
    assert {k: v for k, v in vars(own).items() if k not in ("name", "reads_real_gains")} == \
        {k: v for k, v in vars(ten).items() if k not in ("name", "reads_real_gains")}
    assert own.reads_real_gains and not ten.reads_real_gains and not nine.reads_real_gains
    assert resolve_profile(None) == DEFAULT_PROFILE == resolve_profile(None, "integer")
    assert resolve_profile(None, "real") == "cranfield" == REAL_GAINS_PROFILE
    assert resolve_profile("trec_eval-10", "real") == "trec_eval-10"
    with pytest.raises(AttributeError):
        ten.float32_scores = True  # frozen


def test_no_code_compares_a_profile_name():
    found = []
    for rel, tree in trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and any(
                    isinstance(c, ast.Constant) and isinstance(c.value, str)
                    and c.value.startswith("trec_eval-") for c in (node.left, *node.comparators)):
                found.append(f"{rel}:{node.lineno}")
    assert found == []


def test_all_trec_membership_is_given_by_flags_not_names():
    """A measure's ``all_trec`` profiles are every profile, none, or those a Profile flag
    picks (``all_trec_has_10_measures``), never profile names picked by hand (issue #31:
    cranfield's all_trec is trec_eval 10's)."""
    from cranfield.measures.registry import NICKNAMES, REGISTRY

    ten = {n for n, p in PROFILES.items() if p.all_trec_has_10_measures}
    allowed = [set(), set(PROFILES), ten]
    assert [m.name for m in REGISTRY.values() if set(m.all_trec) not in allowed] == []
    assert {m.name for m in REGISTRY.values() if set(m.all_trec) == ten} == \
        {"rbp", "rbp_resid", "unj"}
    assert NICKNAMES["all_trec"]("cranfield") == NICKNAMES["all_trec"]("trec_eval-10")


# ---- settings ----------------------------------------------------------------------------------

def test_settings_read_the_environment():
    assert Settings.from_environ({}) == Settings()
    got = Settings.from_environ({"CRANFIELD_FAST_READER_MIN_BYTES": "7",
                                 "CRANFIELD_READ_THREADS": "1",
                                 "CRANFIELD_FAST_JSON_MIN_BYTES": "9"})
    assert got == Settings(fast_reader_min_bytes=7, read_threads=True, fast_json_min_bytes=9)
    assert Settings.from_environ({"CRANFIELD_READ_THREADS": "yes"}).read_threads is False


def test_the_modules_take_their_settings_from_settings():
    assert io.FAST_READER_MIN_BYTES == SETTINGS.fast_reader_min_bytes
    assert json_body.FAST_JSON_MIN_BYTES == SETTINGS.fast_json_min_bytes


def test_only_settings_reads_the_environment():
    found = []
    for rel, tree in trees():
        if rel.name == "settings.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv") and (
                    isinstance(node.value, ast.Name) and node.value.id == "os"):
                found.append(f"{rel}:{node.lineno}")
    assert found == []


# ---- private helpers ---------------------------------------------------------------------------

def test_no_private_name_is_imported_across_modules():
    """``from .x import _helper`` is a private helper leaking: make it public or move it. A
    private module (``from . import _json_kernels``) is the package's own business."""
    found = []
    for rel, tree in trees():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            module = node.module or ""
            for alias in node.names:
                if not alias.name.startswith("_") or alias.name.startswith("__"):
                    continue
                base = rel.parent if node.level else Path()
                for _ in range(max(node.level - 1, 0)):
                    base = base.parent
                target = base.joinpath(*module.split("."), alias.name) if module else \
                    base / alias.name
                if any((ENGINE.parent / target).with_suffix(suffix).exists()
                       for suffix in (".py", ".c")):
                    continue  # a module of the package (or its C source), not a helper
                found.append(f"{rel}:{node.lineno}: {alias.name}")
    assert found == []


# ---- aliases -----------------------------------------------------------------------------------

def test_aliases_are_declared_at_registration_only():
    from cranfield.measures import REGISTRY
    from cranfield.measures.names import parse_measure
    from cranfield.measures.peer_names import ALIASES, IR_NAMES

    assert ALIASES == {a for m in REGISTRY.values() for a in m.aliases}
    assert {"MAP", "MRR", "Precision", "Recall", "RPrec", "BPref", "NDCG", "NumRelRet",
            "AP_IA", "α_nDCG", "α_DCG", "StRecall"} <= ALIASES
    for m in REGISTRY.values():
        for alias in m.aliases:
            if m.ir_name in IR_NAMES and alias != m.ir_name:
                assert IR_NAMES[alias] == IR_NAMES[m.ir_name], alias
            for form in (alias, f"{alias}@10"):
                try:
                    mine = [(i.measure.name, i.value) for i in parse_measure(form)]
                except cranfield.MeasureError:
                    continue
                ir = m.ir_name or m.name
                assert mine == [(i.measure.name, i.value) for i in parse_measure(
                    form.replace(alias, ir, 1))], form
