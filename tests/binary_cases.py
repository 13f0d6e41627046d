"""What the tests of data made by the real trec_eval binaries share (tests/data/*/
make_expected.py: the script that made the cases and ran the binaries): the profile of each
binary's tag, and the script loaded as a module, so a test gives Cranfield the very inputs
the binaries were given (tests/ is on sys.path, as for ``columnar_tables``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

#: a binary's tag in the data (its expected outputs' suffix) -> Cranfield's profile of it
PROFILES = {"v9.0.8": "trec_eval-9.0.8", "v10.0": "trec_eval-10"}


def make_expected(data: Path) -> ModuleType:
    """``data``/make_expected.py, the script that ran the binaries on these cases, as a
    module."""
    spec = importlib.util.spec_from_file_location("make_expected", data / "make_expected.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
