"""The engine's configuration, read from the environment once, here: the only module of
``cranfield`` that reads ``os.environ``. The modules that use a setting copy it into a module
constant of their own (``cranfield.io.FAST_READER_MIN_BYTES`` …), which tests may patch.

========================================  ========  ==============================================
variable                                  default   what
========================================  ========  ==============================================
``CRANFIELD_FAST_READER_MIN_BYTES``       4 MiB     TREC files this large go to pyarrow's reader
``CRANFIELD_READ_THREADS``                0         1: pyarrow parses with threads (~15% more
                                                    memory in flight)
``CRANFIELD_FAST_JSON_MIN_BYTES``         1 MiB     JSON bodies this large go to the compiled scan
========================================  ========  ==============================================
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

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        default = cls()
        return cls(
            fast_reader_min_bytes=int(environ.get("CRANFIELD_FAST_READER_MIN_BYTES",
                                                  default.fast_reader_min_bytes)),
            read_threads=environ.get("CRANFIELD_READ_THREADS", "0") == "1",
            fast_json_min_bytes=int(environ.get("CRANFIELD_FAST_JSON_MIN_BYTES",
                                                default.fast_json_min_bytes)),
        )


SETTINGS = Settings.from_environ()
