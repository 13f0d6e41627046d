"""The engine as an install without its compiled extension (``cranfield.inputs._mapscan``,
optional: no C compiler at install) runs it, for the tests and the benchmarks that compare
the compiled path with the Python one.

Every engine module that calls the extension imports it itself (``from . import _mapscan``),
and reads its ``_mapscan`` at call time; ``json_body`` loads the JSON kernels once into
``_kernels``. :func:`without_extension` finds the importers in the engine's source, so a new
importer is patched too, with no list to keep::

    def test_x(monkeypatch):
        without_extension(monkeypatch)

    with extension_off():  # no pytest (bench/)
        ...
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import cranfield

ENGINE = Path(cranfield.__file__).parent
EXTENSION = "_mapscan"


@cache
def extension_importers() -> tuple[str, ...]:
    """The engine modules whose source imports the extension (``from . import _mapscan``,
    ``from .. import _mapscan``, ``import cranfield.inputs._mapscan``), by dotted name."""
    found = []
    for path in sorted(ENGINE.rglob("*.py")):
        parts = list(path.relative_to(ENGINE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        tree = ast.parse(path.read_text(), str(path))
        if any(isinstance(node, ast.ImportFrom) and EXTENSION in (a.name for a in node.names)
               or isinstance(node, ast.Import)
               and any(a.name.rpartition(".")[2] == EXTENSION for a in node.names)
               for node in ast.walk(tree)):
            found.append(".".join(parts))
    return tuple(found)


def extension_holders() -> list[ModuleType]:
    """The modules whose source imports the extension, imported. (Their package holds it too,
    as the attribute naming its submodule, which no engine code reads: left alone, since a
    module first imported while it was patched would keep the None.)"""
    return [importlib.import_module(name) for name in extension_importers()]


class _Setattr(Protocol):
    def setattr(self, target: Any, name: str, value: Any) -> None: ...


def without_extension(mp: _Setattr) -> None:
    """Through ``mp`` (a ``pytest.MonkeyPatch``), run the engine as without the extension:
    ``_mapscan`` is None in every module holding it, and ``json_body`` has no JSON kernels."""
    from cranfield.inputs import json_body

    mp.setattr(json_body, "_kernels", False)
    for module in extension_holders():
        mp.setattr(module, EXTENSION, None)


class _Saved:
    def __init__(self) -> None:
        self.saved: list[tuple[Any, str, Any]] = []

    def setattr(self, target: Any, name: str, value: Any) -> None:
        self.saved.append((target, name, getattr(target, name)))
        setattr(target, name, value)

    def undo(self) -> None:
        while self.saved:
            target, name, value = self.saved.pop()
            setattr(target, name, value)


@contextmanager
def extension_off() -> Iterator[None]:
    """:func:`without_extension` for the block, undone after it (for code without pytest)."""
    saved = _Saved()
    try:
        without_extension(saved)
        yield
    finally:
        saved.undo()
