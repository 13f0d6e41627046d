"""tests/extension_off.py, which the fallback tests and bench/accelerator.py use to run the
engine without its compiled extension, patches every module holding it, and only those a
source imports it into: a new importer needs no list kept by hand (review of issue #29)."""

from __future__ import annotations

import importlib
import pkgutil
import sys

import pytest
from extension_off import extension_holders, extension_importers, extension_off, without_extension

import cranfield
from cranfield.inputs import json_body


def _all_engine_modules() -> None:
    for info in pkgutil.walk_packages(cranfield.__path__, "cranfield."):
        importlib.import_module(info.name)


def test_the_importers_found_in_the_source_are_every_module_holding_the_extension():
    _all_engine_modules()
    holding = sorted(name for name, module in sys.modules.items()
                     if name.startswith("cranfield.") and not name.endswith("._mapscan")
                     and hasattr(module, "_mapscan")
                     and sys.modules.get(f"{name}._mapscan") is None)  # not the package's own
    assert holding == sorted(extension_importers())
    assert {"cranfield.inputs.docid_keys", "cranfield.inputs.mappings",
            "cranfield.inputs.trec_fast", "cranfield.inputs.ranking"} <= set(holding)
    assert sorted(m.__name__ for m in extension_holders()) == holding


def test_without_extension_leaves_no_module_holding_it(monkeypatch):
    without_extension(monkeypatch)
    assert [m.__name__ for m in extension_holders() if m._mapscan is not None] == []
    assert json_body._kernels is False
    assert json_body.decode_body(b'{"run": {"q": {"d": 1.0}}}', min_bytes=0) is None


@pytest.mark.requires(json_body.warm_up(), reason="the C extension built "
                      "(cranfield.inputs._mapscan)")
def test_extension_off_undoes_what_it_patched():
    before = [(m.__name__, m._mapscan) for m in extension_holders()]
    kernels = json_body._kernels
    with extension_off():
        assert [m for m in extension_holders() if m._mapscan is not None] == []
    assert [(m.__name__, m._mapscan) for m in extension_holders()] == before
    assert json_body._kernels is kernels and kernels
