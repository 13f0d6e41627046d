"""The engine's configuration, read from the environment once, here: the only module of
``cranfield`` that reads ``os.environ``. The modules that use a setting copy it into a module
constant of their own (``cranfield.inputs.io.FAST_READER_MIN_BYTES`` …), which tests may patch.

========================================  ========  ==============================================
variable                                  default   what
========================================  ========  ==============================================
``CRANFIELD_FAST_READER_MIN_BYTES``       4 MiB     TREC files this large go to pyarrow's reader
``CRANFIELD_READ_THREADS``                0         1: pyarrow parses with threads (~15% more
                                                    memory in flight)
``CRANFIELD_FAST_JSON_MIN_BYTES``         1 MiB     JSON bodies this large go to the compiled scan
``CRANFIELD_TABLE_MAX_ROWS``              10^9      rows of a Parquet / Arrow run file (0: none)
``CRANFIELD_TABLE_MAX_BYTES``             512 MiB   uncompressed bytes of a Parquet / Arrow file
                                                    (0: none)
``CRANFIELD_TABLE_MAX_MEMORY``            none      memory a Parquet / Arrow file will take once
                                                    read, estimated from its metadata: rows x
                                                    the bytes a row costs + uncompressed bytes
                                                    (0: none; the service's bound too, 1 GiB
                                                    there unless set)
========================================  ========  ==============================================

The table bounds are checked from a file's metadata before anything is decompressed, as
the service checks an upload (their defaults are the service's MAX_TOPICS x
MAX_DOCS_PER_TOPIC and MAX_CONTENT_LENGTH): a file the service takes, the library and the
CLI take, and one it refuses they refuse with the same sentence.

The ``cranfield`` command's server commands read theirs when they run (:class:`CliEnvironment`:
``CRANFIELD_SERVER``, ``CRANFIELD_API_KEY`` and the CI's variables), not at import. Its
commands that multiply no matrices (all but ``compare``) set ``OPENBLAS_NUM_THREADS=1``
unless it is set (:func:`one_blas_thread`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    """What the environment sets for the engine (see the module's table)."""

    # Below this size the line reader is faster than importing and starting pyarrow
    fast_reader_min_bytes: int = 4 << 20
    # Multi-threaded parsing is faster on an idle machine but holds ~15% more memory in flight
    read_threads: bool = False
    # Below this size orjson is faster than the compiled JSON scan's fixed costs
    fast_json_min_bytes: int = 1 << 20
    # Parquet / Arrow files read by path, bytes or file object (cranfield.inputs.columnar's
    # local_bounds): None is no bound; a compressed file may decode to far more than its size
    table_max_rows: int | None = 100_000 * 10_000
    table_max_bytes: int | None = 512 * 1024 * 1024
    # the memory a file will take once read: the service bounds it (a 16.7 MB Parquet file of
    # 20M rows took a server 359 -> 1,515 MB, issue 27); the library and the CLI read what the
    # same data as TREC text would be read (trec_eval has no bound) unless this is set
    table_max_memory: int | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        default = cls()
        return cls(
            fast_reader_min_bytes=int(environ.get("CRANFIELD_FAST_READER_MIN_BYTES",
                                                  default.fast_reader_min_bytes)),
            read_threads=environ.get("CRANFIELD_READ_THREADS", "0") == "1",
            fast_json_min_bytes=int(environ.get("CRANFIELD_FAST_JSON_MIN_BYTES",
                                                default.fast_json_min_bytes)),
            table_max_rows=_bound(environ, "CRANFIELD_TABLE_MAX_ROWS", default.table_max_rows),
            table_max_bytes=_bound(environ, "CRANFIELD_TABLE_MAX_BYTES",
                                   default.table_max_bytes),
            table_max_memory=_bound(environ, "CRANFIELD_TABLE_MAX_MEMORY",
                                    default.table_max_memory),
        )


def _bound(environ: Mapping[str, str], name: str, default: int | None) -> int | None:
    """A bound from the environment: a positive integer, 0 for none (None)."""
    text = environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name} must be an integer (0: no bound), got {text!r}") from None
    if value < 0:
        raise ValueError(f"{name} must be 0 (no bound) or more, got {text!r}")
    return value or None


SETTINGS = Settings.from_environ()


@dataclass(frozen=True)
class CliEnvironment:
    """What the environment tells ``cranfield``'s server commands (``--server``'s and
    ``--api-key``'s defaults; the CI's run number, commit and GitHub Actions outputs for
    ``cranfield gate``), read when a command runs: a CI step or a test sets them per call."""

    server: str | None = None            # CRANFIELD_SERVER
    api_key: str | None = None           # CRANFIELD_API_KEY
    run_number: str | None = None        # GITHUB_RUN_NUMBER, else GitLab's CI_PIPELINE_IID
    commit: str | None = None            # GITHUB_SHA, else GitLab's CI_COMMIT_SHA
    github_actions: bool = False         # GITHUB_ACTIONS=true: workflow commands on stdout
    step_summary: str | None = None      # GITHUB_STEP_SUMMARY: a file the Markdown joins

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> CliEnvironment:
        env = os.environ if environ is None else environ

        def first(*names: str) -> str | None:
            return next((env[n] for n in names if env.get(n)), None)

        return cls(server=first("CRANFIELD_SERVER"), api_key=first("CRANFIELD_API_KEY"),
                   run_number=first("GITHUB_RUN_NUMBER", "CI_PIPELINE_IID"),
                   commit=first("GITHUB_SHA", "CI_COMMIT_SHA"),
                   github_actions=env.get("GITHUB_ACTIONS") == "true",
                   step_summary=first("GITHUB_STEP_SUMMARY"))


def one_blas_thread() -> None:
    """``OPENBLAS_NUM_THREADS=1`` unless the environment sets it, for a ``cranfield`` command
    that multiplies no matrices (:func:`cranfield.cli.main`), before numpy loads: numpy's
    OpenBLAS reads it then, and otherwise starts a thread per core at import."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
